"""Round trip through confluent-kafka-python (librdkafka) against a Sluice broker.

AdminClient creates the topic, an idempotent Producer (acks=all) writes COUNT
keyed messages and flushes, then a Consumer reads every partition from the
beginning through assign() (no consumer group) and checks that every message
came back once, with its key, in produced order per partition.

Prints OK and exits 0 on success; prints what differs and exits 1 otherwise.
Run by e2e/clients_test.go with /usr/bin/python3 (Debian's confluent_kafka).
"""

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    futures = admin.create_topics([NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)],
                                  operation_timeout=30)
    try:
        futures[args.topic].result(timeout=args.timeout)
    except KafkaException as e:
        fail("create topic %s: %s" % (args.topic, e))
    md = admin.list_topics(topic=args.topic, timeout=args.timeout)
    tmd = md.topics.get(args.topic)
    if tmd is None or tmd.error is not None or len(tmd.partitions) != args.partitions:
        fail("metadata for %s after create: %r" % (args.topic, tmd))

    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
    })
    delivered = {}  # value -> (partition, offset)
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append("%s: %s" % (msg.value(), err))
            return
        delivered[msg.value().decode()] = (msg.partition(), msg.offset())

    for i in range(args.count):
        while True:
            try:
                producer.produce(args.topic, key=("key-%d" % (i % 37)).encode(), value=("value-%d" % i).encode(),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(args.timeout)
    if left:
        fail("%d messages still undelivered after flush" % left)
    if errors:
        fail("%d delivery errors, first: %s" % (len(errors), errors[0]))
    if len(delivered) != args.count:
        fail("%d messages delivered, want %d" % (len(delivered), args.count))

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": "e2e-unused",  # required by the client; assign() never joins the group
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    })
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)])
    got = {}  # value -> (partition, offset, key)
    deadline = time.monotonic() + args.timeout
    while len(got) < args.count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            fail("consume: %s" % msg.error())
        v = msg.value().decode()
        if v in got:
            fail("%s consumed twice: at %s and %d/%d" % (v, got[v], msg.partition(), msg.offset()))
        got[v] = (msg.partition(), msg.offset(), msg.key().decode())
    consumer.close()

    if len(got) != args.count:
        missing = sorted(set(delivered) - set(got))[:5]
        fail("consumed %d of %d messages before the deadline; missing e.g. %s" % (len(got), args.count, missing))
    last = {}
    for i in range(args.count):
        v = "value-%d" % i
        p, o, k = got[v]
        if (p, o) != delivered[v]:
            fail("%s delivered at %s but consumed at %d/%d" % (v, delivered[v], p, o))
        if k != "key-%d" % (i % 37):
            fail("%s has key %s" % (v, k))
        if p in last and o <= last[p]:
            fail("%s at %d/%d is not after the previous message's offset %d" % (v, p, o, last[p]))
        last[p] = o
    print("OK: %d messages round-tripped through %d partitions" % (args.count, args.partitions), flush=True)


if __name__ == "__main__":
    main()
