"""Fault injection for worker subprocesses in tests (never imported by streameval itself).

A test puts this directory first on the worker's ``PYTHONPATH``; Python imports ``sitecustomize`` at
start-up, and when ``STREAMEVAL_TEST_FAULT`` names a stage this module patches that stage to fail on
the batch holding an event with the marker ``INJECT-FAULT`` in it, once per process:

- ``decode``: ``Pipeline.decode`` raises (a bug met while reading one event)
- ``evaluate``: the processor's batch evaluation (``evaluate_messages``) raises (a bug that escapes
  per-event handling)
- ``record``: ``ResultStore.record_many`` raises a Redis error that is not an outage
- ``publish``: the producer refuses the marker's result (``KafkaTimeoutError``)
- ``commit``: the consumer's next offset commit after the marker raises ``CommitFailedError``
- ``hang``: ``ResultStore.record_many`` never returns for the marker's batch (a wedged stage)
- ``closer``: ``Processor.close_windows`` raises on its next tick after the marker, once
- ``lost-produce``: the first produce request after the marker is never answered (the request is
  dropped; the client's own request timeout still applies)
- ``freeze``: decoding the marker blocks the event loop for 120 s (``time.sleep``)
- ``slow``: every batch is held ``STREAMEVAL_TEST_DELAY_S`` seconds before its evaluation (batches
  pile up between the take and the publisher, as with slow judges)
"""

from __future__ import annotations

import asyncio
import os

STAGE = os.environ.get("STREAMEVAL_TEST_FAULT")
MARKER = b"INJECT-FAULT"
_state = {"fired": False, "seen": False}


def _fire(hit: bool) -> bool:
    if hit and not _state["fired"]:
        _state["fired"] = True
        return True
    return False


def _install() -> None:  # one small patch per stage
    from streameval.pipeline import Pipeline
    from streameval.processor import Processor
    from streameval.store import ResultStore

    if STAGE == "decode":
        decode = Pipeline.decode

        def bad_decode(self, raw):  # type: ignore[no-untyped-def]
            if _fire(MARKER in raw):
                raise RuntimeError("injected decode fault")
            return decode(self, raw)

        Pipeline.decode = bad_decode  # type: ignore[method-assign]
    elif STAGE == "evaluate":
        import streameval.processor as processor_module

        evaluate_messages = processor_module.evaluate_messages  # what Processor.process_batch evaluates with

        async def bad_evaluate(pipeline, inputs, batch, pool, **kwargs):  # type: ignore[no-untyped-def]
            if _fire(any(MARKER in raw for raw, _ in batch)):
                raise RuntimeError("injected evaluate fault")
            return await evaluate_messages(pipeline, inputs, batch, pool, **kwargs)

        processor_module.evaluate_messages = bad_evaluate
    elif STAGE in ("record", "hang"):
        from redis.exceptions import ResponseError

        record_many = ResultStore.record_many

        async def bad_record(self, results, dead=(), **kwargs):  # type: ignore[no-untyped-def]
            if _fire(
                any(MARKER in item[0].id.encode() for item in results)
            ):  # (result, encoded, counters[, content])
                if STAGE == "hang":
                    await asyncio.Event().wait()
                raise ResponseError("OOM command not allowed when used memory > 'maxmemory' (injected)")
            return await record_many(self, results, dead, **kwargs)

        ResultStore.record_many = bad_record  # type: ignore[method-assign]
    elif STAGE == "publish":
        from aiokafka.errors import KafkaTimeoutError
        from faust.transport.drivers.aiokafka import Producer

        send = Producer.send

        async def bad_send(self, topic, key, value, *args, **kwargs):  # type: ignore[no-untyped-def]
            if _fire(value is not None and MARKER in value):
                raise KafkaTimeoutError("injected publish fault")
            return await send(self, topic, key, value, *args, **kwargs)

        Producer.send = bad_send  # type: ignore[method-assign]
    elif STAGE == "commit":
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import CommitFailedError

        decode = Pipeline.decode
        commit = AIOKafkaConsumer.commit

        def seeing_decode(self, raw):  # type: ignore[no-untyped-def]
            if MARKER in raw:
                _state["seen"] = True
            return decode(self, raw)

        async def bad_commit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if _fire(_state["seen"]):
                raise CommitFailedError("injected commit fault")
            return await commit(self, *args, **kwargs)

        Pipeline.decode = seeing_decode  # type: ignore[method-assign]
        AIOKafkaConsumer.commit = bad_commit  # type: ignore[method-assign]
    elif STAGE == "closer":
        decode = Pipeline.decode
        close_windows = Processor.close_windows

        def seeing_decode(self, raw):  # type: ignore[no-untyped-def]
            if MARKER in raw:
                _state["seen"] = True
            return decode(self, raw)

        async def bad_close(self, closer, send):  # type: ignore[no-untyped-def]
            if _fire(_state["seen"]):
                raise RuntimeError("injected window closer fault")
            return await close_windows(self, closer, send)

        Pipeline.decode = seeing_decode  # type: ignore[method-assign]
        Processor.close_windows = bad_close  # type: ignore[method-assign]
    elif STAGE == "lost-produce":
        from aiokafka.conn import AIOKafkaConnection
        from aiokafka.util import wait_for

        decode = Pipeline.decode
        send_request = AIOKafkaConnection.send

        def seeing_decode(self, raw):  # type: ignore[no-untyped-def]
            if MARKER in raw:
                _state["seen"] = True
            return decode(self, raw)

        def lossy_send(self, request, expect_response=True):  # type: ignore[no-untyped-def]
            if (
                expect_response
                and type(request).__name__.startswith("ProduceRequest")
                and _fire(_state["seen"])
            ):
                import logging

                logging.getLogger("faultinject").warning("injected: a produce request is lost")
                return wait_for(self._loop.create_future(), self._request_timeout)  # no answer, ever
            return send_request(self, request, expect_response)

        Pipeline.decode = seeing_decode  # type: ignore[method-assign]
        AIOKafkaConnection.send = lossy_send  # type: ignore[method-assign]
    elif STAGE == "freeze":
        import logging
        import time

        decode = Pipeline.decode

        def freezing_decode(self, raw):  # type: ignore[no-untyped-def]
            if _fire(MARKER in raw):
                logging.getLogger("faultinject").warning("injected: the event loop is frozen")
                time.sleep(120)
            return decode(self, raw)

        Pipeline.decode = freezing_decode  # type: ignore[method-assign]
    elif STAGE == "slow":
        delay = float(os.environ.get("STREAMEVAL_TEST_DELAY_S", "0.3"))
        process_batch = Processor.process_batch

        async def slow_process(self, batch, **kwargs):  # type: ignore[no-untyped-def]
            await asyncio.sleep(delay)
            return await process_batch(self, batch, **kwargs)

        Processor.process_batch = slow_process  # type: ignore[method-assign]
    else:
        raise SystemExit(f"STREAMEVAL_TEST_FAULT: unknown stage {STAGE!r}")


if STAGE:
    _install()
