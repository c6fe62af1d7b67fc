"""confluent-kafka-python (librdkafka) against a three-broker Sluice cluster,
for e2e/cluster_clients_test.go. The Go test drives it in two phases and
kills a broker between the lines it reads; this script checks nothing
itself, it reports every event on stdout and the Go side judges.

  produce  an idempotent producer (acks=all) writes COUNT keyed records
           "cc-<i>" (key "key-<i % 37>") to TOPIC at a steady pace, one per
           INTERVAL_MS, serving delivery reports while it waits, then
           flushes. Lines:
             SENT <n>                        every 100 records handed to the client
             ALLSENT <n>                     every record handed over
             DELIVERED <partition> <offset> <value>
             FAILED <value> <error name> fatal=<0|1> retriable=<0|1> <error text>
             ERROR <error name> fatal=<0|1> <error text>   a client-level error
             DONE delivered=<n> failed=<n> undelivered=<n>
  consume  a consumer assign()s every partition of TOPIC from the beginning
           (no group) and reads until each partition has reported EOF past
           the offset UNTIL names for it. Lines:
             MSG <partition> <offset> <value> <key>
             EOF <partition> <offset>
             ERROR <error name> <error text>
             DONE consumed=<n>      or   TIMEOUT consumed=<n>

Every line is flushed at once. Exits 0 unless the arguments are wrong.
Run by the Go test with /usr/bin/python3 (Debian's confluent_kafka).
"""

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def flag(b):
    return "1" if b else "0"


def produce(args):
    counts = {"delivered": 0, "failed": 0}

    def on_error(err):
        say("ERROR %s fatal=%s %s" % (err.name(), flag(err.fatal()), err.str()))

    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": args.message_timeout_ms,
        "error_cb": on_error,
    })

    def on_delivery(err, msg):
        value = msg.value().decode()
        if err is not None:
            counts["failed"] += 1
            say("FAILED %s %s fatal=%s retriable=%s %s" % (
                value, err.name(), flag(err.fatal()), flag(err.retriable()), err.str()))
            return
        counts["delivered"] += 1
        say("DELIVERED %d %d %s" % (msg.partition(), msg.offset(), value))

    start = time.monotonic()
    for i in range(args.count):
        # Pace the stream: serve delivery reports until this record is due.
        due = start + i * args.interval_ms / 1000.0
        while True:
            left = due - time.monotonic()
            if left <= 0:
                break
            producer.poll(left)
        while True:
            try:
                producer.produce(args.topic, key=("key-%d" % (i % 37)).encode(), value=("cc-%d" % i).encode(),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if (i + 1) % 100 == 0:
            say("SENT %d" % (i + 1))
    say("ALLSENT %d" % args.count)
    left = producer.flush(args.flush_timeout)
    say("DONE delivered=%d failed=%d undelivered=%d" % (counts["delivered"], counts["failed"], left))


def consume(args):
    until = {}
    for part in args.until.split(","):
        p, o = part.split(":")
        until[int(p)] = int(o)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": "e2e-unused",  # required by the client; assign() never joins the group
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in sorted(until)])
    eof = {}
    consumed = 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if all(eof.get(p, -1) > o for p, o in until.items()):
            say("DONE consumed=%d" % consumed)
            consumer.close()
            return
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                eof[msg.partition()] = msg.offset()
                say("EOF %d %d" % (msg.partition(), msg.offset()))
            else:
                say("ERROR %s %s" % (err.name(), err.str()))
            continue
        consumed += 1
        key = msg.key().decode() if msg.key() is not None else "-"
        say("MSG %d %d %s %s" % (msg.partition(), msg.offset(), msg.value().decode(), key))
    say("TIMEOUT consumed=%d" % consumed)
    consumer.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--interval-ms", type=float, default=2.0)
    ap.add_argument("--message-timeout-ms", type=int, default=60000)
    ap.add_argument("--flush-timeout", type=float, default=90.0)
    ap.add_argument("--until", default="", help="partition:offset,... (consume)")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    if args.phase == "produce":
        produce(args)
    else:
        if not args.until:
            ap.error("consume needs --until")
        consume(args)


if __name__ == "__main__":
    main()
