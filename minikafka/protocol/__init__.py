"""Kafka wire protocol: frames, request/response headers and the API table.

Request and response bodies are kafka-python's JSON-schema message classes
(``kafka.protocol.*``); this package adds what a broker needs around them.
"""
