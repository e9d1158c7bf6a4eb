"""Live status on AWS: the WebSocket API's JWT check, its connections table and the two ways events leave.

``queue_publisher`` hands events from the functions in the VPC to the live-events queue (``relay`` is the message),
and the publisher function outside the VPC posts them (``posting``); ``publisher`` posts directly, for functions
that reach the internet. Each module imports boto3 or PyJWT only where it needs them, so the authorizer never loads
boto3's Management API model and the API function never loads PyJWT.
"""
