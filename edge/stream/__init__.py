"""``edge-agent stream``: pacer, on-disk spool and the gRPC client that streams units."""
