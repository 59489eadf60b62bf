"""The FastAPI app: routers by resource, dependencies for the Redis store and auth."""
