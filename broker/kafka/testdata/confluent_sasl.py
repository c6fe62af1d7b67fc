"""Produce one record and read it back with confluent-kafka (librdkafka)
over SASL_SSL. Prints OK on success; exits 1 otherwise."""
import argparse
import sys
import uuid

from confluent_kafka import Consumer, Producer

p = argparse.ArgumentParser()
p.add_argument("--bootstrap", required=True)
p.add_argument("--mechanism", required=True)
p.add_argument("--user", required=True)
p.add_argument("--password", required=True)
p.add_argument("--cafile", required=True)
p.add_argument("--topic", required=True)
a = p.parse_args()

common = {
    "bootstrap.servers": a.bootstrap,
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": a.mechanism,
    "sasl.username": a.user,
    "sasl.password": a.password,
    "ssl.ca.location": a.cafile,
}
value = str(uuid.uuid4()).encode()
errors = []
prod = Producer({**common, "acks": "all"})
prod.produce(a.topic, value, on_delivery=lambda err, msg: err and errors.append(err))
if prod.flush(30) != 0 or errors:
    print("produce failed:", errors)
    sys.exit(1)
cons = Consumer({**common, "group.id": "confluent-sasl", "auto.offset.reset": "earliest"})
cons.subscribe([a.topic])
for _ in range(60):
    msg = cons.poll(1.0)
    if msg is None:
        continue
    if msg.error():
        print("consume error:", msg.error())
        sys.exit(1)
    if msg.value() == value:
        cons.close()
        print("OK")
        sys.exit(0)
print("record not read back")
sys.exit(1)
