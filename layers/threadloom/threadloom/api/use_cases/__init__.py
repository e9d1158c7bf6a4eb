"""The HTTP API's use cases, one module per resource, mirroring the API's routers."""
