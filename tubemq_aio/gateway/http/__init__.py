"""HTTP wing: FastAPI dependencies, request/response schemas, the error table, auth, routes."""
