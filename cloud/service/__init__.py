"""``cloud-decoder serve``: the gRPC service (thin servicer over a transport-free core)."""
