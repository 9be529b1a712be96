"""Probe Worker (run by run.mjs in real workerd): sends each value of `cases.CASES` to a
Durable Object as an RPC argument and asks the object to return it, and reports what arrived
(`cases.describe`) or which refusal stopped it (`cases.refusal`)."""

import json

from cases import CASES, describe, refusal
from workers import DurableObject, Response, WorkerEntrypoint


class Probe(DurableObject):
    async def receive(self, value):
        return {"received": json.dumps(describe(value))}

    async def give(self, name):
        return CASES[name]()


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        stub = self.env.PROBE.getByName("probe")
        observed = {}
        for name, make in CASES.items():
            row = {}
            try:
                row["argument"] = json.loads((await stub.receive(make()))["received"])
            except BaseException as exc:
                row["argument"] = {"refused": refusal(exc)}
            try:
                row["result"] = describe(await stub.give(name))
            except BaseException as exc:
                row["result"] = {"refused": refusal(exc)}
            observed[name] = row
        lines = [f"{json.dumps(name)}: {json.dumps(row)}" for name, row in observed.items()]
        return Response("{\n" + ",\n".join(lines) + "\n}\n")
