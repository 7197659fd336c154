"""End-to-end recipes that chain the CLI's commands (each in its own process) into one experiment."""
