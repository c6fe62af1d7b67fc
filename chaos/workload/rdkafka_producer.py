"""An idempotent librdkafka producer (confluent-kafka-python) for the chaos
workload (chaos/workload/rdkafka.go), which drives it over stdin and
records what it reports; this script checks nothing itself.

  argv: BOOTSTRAP TOPIC DELIVERY_TIMEOUT_MS
  stdin, one send a line:   <partition> <key> <value>
  stdout, every line flushed at once:
    READY                                   the producer exists
    OK <value> <partition> <offset>         acknowledged
    ERR <value> <error name> <error text>   a delivery report with an error
    CLIENTERR <error name> fatal=<0|1> <error text>
    DONE undelivered=<n>                    stdin closed and the flush ended

Keys and values carry no spaces (the workload's "k3", "k3-7-42"). At the
end of stdin the producer flushes for up to DELIVERY_TIMEOUT_MS and exits 0;
sends without a report stay unresolved (the workload records them as info).
Run with /usr/bin/python3 (Debian's python3-confluent-kafka, as .ci/run
installs it).
"""

import sys
import threading

from confluent_kafka import Producer

out_lock = threading.Lock()


def say(line):
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main():
    bootstrap, topic, timeout_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def on_error(err):
        say("CLIENTERR %s fatal=%s %s" % (err.name(), "1" if err.fatal() else "0", err.str().replace("\n", " ")))

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": "chaos-librdkafka",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": timeout_ms,
        "error_cb": on_error,
    })

    def on_delivery(err, msg):
        value = msg.value().decode()
        if err is not None:
            say("ERR %s %s %s" % (value, err.name(), err.str().replace("\n", " ")))
            return
        say("OK %s %d %d" % (value, msg.partition(), msg.offset()))

    stop = threading.Event()

    def serve():
        # Delivery reports are served by poll; stdin reads may block.
        while not stop.is_set():
            producer.poll(0.05)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    say("READY")
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 3:
            continue
        partition, key, value = int(parts[0]), parts[1], parts[2]
        while True:
            try:
                producer.produce(topic, key=key.encode(), value=value.encode(), partition=partition,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)  # the local queue is full: wait for reports
    stop.set()
    server.join()
    left = producer.flush(timeout_ms / 1000.0)
    say("DONE undelivered=%d" % left)


if __name__ == "__main__":
    main()
