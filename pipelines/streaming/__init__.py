"""The streaming driver: a release that steps as data arrives (watched folders, Pub/Sub,
Kafka), through the same lifecycle as the incremental steps."""
