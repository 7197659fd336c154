"""The command-line commands of `python -m jaxrl.main`, one module per command (`eval`, `sample`, `sft`,
`grpo`, `score`, `serve`, `data`). `jaxrl.main` parses the command line, loads the config and dispatches here;
each module's `run` takes the validated Config. Their inputs are checked before any model or sandbox work, so bad input
fails in a second with a ConfigError (exit 2)."""
