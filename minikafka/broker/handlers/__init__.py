"""One module per Kafka API; each exposes ``async def handle(ctx, request) -> response | None``."""
