"""Several brokers in one process that replicate and fail over as Kafka's do: the controller that
decides leaders and in-sync replicas, and where each partition's replicas are placed."""
