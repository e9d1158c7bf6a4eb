"""Threadloom over the Model Context Protocol: one server definition, served over stdio and Streamable HTTP.

``server.build_server`` defines the tools and resources once (on the official ``mcp`` SDK's low-level
``Server``); ``stdio`` runs it for a desktop agent (``threadloom mcp``), ``http`` answers API Gateway
events for ``/mcp`` (the Lambda function and the local server). Nothing here is imported by the API's
cold path: the function's entry imports ``threadloom.mcp.http`` only for a request to ``/mcp``.
"""
