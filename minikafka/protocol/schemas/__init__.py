"""Kafka's JSON message definitions of the APIs kafka-python has no classes for (package data).

The files follow Kafka's format (clients/src/main/resources/common/message/ in apache/kafka) and are
read by kafka-python's schema loader; :mod:`minikafka.protocol.consumer_group_apis` builds the classes.
"""
