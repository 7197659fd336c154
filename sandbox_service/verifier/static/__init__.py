"""The static (AST) anti-cheat layer's internals; the public entry point is `sandbox_service.verifier.static_rules`."""
