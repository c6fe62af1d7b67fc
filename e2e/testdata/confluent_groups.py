"""One confluent-kafka-python (librdkafka) group member for e2e/groups_test.go.

Subscribes to TOPIC in GROUP with the given partition.assignment.strategy,
auto-commit off, and for every message: prints it, then commits the offset
after it synchronously. It runs until SIGTERM (then closes the consumer,
which leaves the group, and exits 0) or, with --die-after N, dies with
os._exit(1) right after printing its Nth message and before committing it,
as a crashed process would.

Lines on stdout, one event each, flushed at once:
  ASSIGNMENT <p,p,...>       this member's partitions after a rebalance ("-" for none)
  MSG <partition> <offset> <value>
  COMMITTED <partition> <next offset>
  COMMITFAIL <partition> <next offset> <error>
  ERROR <error>              a consumer error (the Go side fails the test)
  CLOSED

Run by the Go test with /usr/bin/python3 (Debian's confluent_kafka).
"""

import argparse
import os
import signal
import sys

from confluent_kafka import Consumer, KafkaException


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--strategy", required=True, choices=["cooperative-sticky", "range", "roundrobin"])
    ap.add_argument("--die-after", type=int, default=0, help="os._exit(1) after this many messages (0: never)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    args = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "partition.assignment.strategy": args.strategy,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": 500,
    })
    cooperative = args.strategy == "cooperative-sticky"
    owned = set()

    def report():
        say("ASSIGNMENT " + (",".join(str(p) for p in sorted(owned)) or "-"))

    def on_assign(_consumer, partitions):
        if not cooperative:
            owned.clear()
        owned.update(tp.partition for tp in partitions)
        report()

    def on_revoke(_consumer, partitions):
        if cooperative:
            owned.difference_update(tp.partition for tp in partitions)
        else:
            owned.clear()
        report()

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)

    seen = 0
    while not stop:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            say("ERROR %s" % msg.error())
            continue
        seen += 1
        say("MSG %d %d %s" % (msg.partition(), msg.offset(), msg.value().decode()))
        if args.die_after and seen >= args.die_after:
            os._exit(1)  # crash: the last message is processed but not committed
        nxt = msg.offset() + 1
        try:
            consumer.commit(message=msg, asynchronous=False)
            say("COMMITTED %d %d" % (msg.partition(), nxt))
        except KafkaException as e:
            say("COMMITFAIL %d %d %s" % (msg.partition(), nxt, e))
    consumer.close()
    say("CLOSED")


if __name__ == "__main__":
    main()
