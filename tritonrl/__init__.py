"""Generated gRPC stubs of protos/ (do not edit; regenerate with python -m sandbox_service.proto_gen)."""
