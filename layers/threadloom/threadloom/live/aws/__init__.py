"""Live status on AWS: the WebSocket API's JWT check, its connections table and the Management-API publisher.

Each module imports boto3 or PyJWT only where it needs them, so the authorizer never loads boto3's
Management API model and the API function never loads PyJWT.
"""
