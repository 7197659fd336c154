"""Serving a policy over an OpenAI-compatible HTTP API (`python -m jaxrl.main serve`).

batcher.py  concurrent requests -> batched generate calls on the thread that owns the sampler
app.py      the FastAPI routes (/v1/models, /v1/chat/completions, /v1/completions), OpenAI's shapes
server.py   loading the configured model (jaxrl.policy), the uvicorn server; the command is jaxrl/cli/serve.py
"""
