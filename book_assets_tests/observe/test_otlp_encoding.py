"""The OTLP request the exporter writes is the message the SDK's own encoder makes, for spans of every shape."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from book_assets.observe.otlp import encode_spans

RESOURCE = Resource.create({"service.name": "book-pipeline", "process.pid": 4242, "host.name": "h"})
OTHER_RESOURCE = Resource(
    {"service.name": "other", "process.command_args": ("python", "-m", "x")}, schema_url="https://r/1"
)
SCOPE = InstrumentationScope("book_pipeline")
VERSIONED_SCOPE = InstrumentationScope("lib", "1.2.3", schema_url="https://s/1", attributes={"a": 1})

ATTRIBUTES: dict[str, Any] = {
    "text": "£ and ✓",
    "empty": "",
    "zero": 0,
    "int": 300,
    "int, the largest one-byte varint": 127,
    "int, the smallest two-byte varint": 128,
    "negative": -5,
    "int64 max": 2**63 - 1,
    "int64 min": -(2**63),
    "float": 0.001,
    "float zero": 0.0,
    "nan-free negative": -1.5,
    "true": True,
    "false": False,
    "bytes": b"\x00\xff",
    "strings": ("a", "", "b"),
    "ints": [1, -1, 2**40],
    "floats": (1.5, 0.0),
    "bools": (True, False),
    "empty sequence": (),
    "mapping": {"k": "v", "n": {"deep": 1}},
    "long": "x" * 300,
    "a length of 127": "y" * 127,
    "a length of 128": "y" * 128,
    "a value of 128": "v" * 126,  # its AnyValue: a tag, a length, 126 bytes
    "pair of 127 bytes": "p" * 104,  # its KeyValue: the key (2 + 17), the value's tag and length, 2 + 104
    "pair of 128 bytes": "p" * 105,
}


def _span(
    span_id: int,
    *,
    resource: Resource = RESOURCE,
    scope: InstrumentationScope | None = SCOPE,
    parent: SpanContext | None = None,
    **fields: Any,
) -> ReadableSpan:
    return ReadableSpan(
        fields.pop("name", "task detail"),
        SpanContext(
            0x0123456789ABCDEF0123456789ABCDEF,
            span_id,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
            trace_state=fields.pop("trace_state", None),
        ),
        parent=parent,
        resource=resource,
        attributes=fields.pop("attributes", {"book_pipeline.task.id": span_id}),
        kind=fields.pop("kind", SpanKind.CONSUMER),
        status=fields.pop("status", Status(StatusCode.UNSET)),
        start_time=fields.pop("start_time", 1_700_000_000_000_000_000 + span_id),
        end_time=fields.pop("end_time", 1_700_000_000_500_000_000 + span_id),
        instrumentation_scope=scope,
        **fields,
    )


REMOTE_PARENT = SpanContext(0x0123456789ABCDEF0123456789ABCDEF, 77, is_remote=True)
LOCAL_PARENT = SpanContext(0x0123456789ABCDEF0123456789ABCDEF, 78, is_remote=False)

SHAPES: dict[str, list[ReadableSpan]] = {
    "a task span": [_span(1, parent=REMOTE_PARENT, attributes=ATTRIBUTES)],
    "a root span with no attributes": [_span(2, attributes={}, kind=SpanKind.INTERNAL)],
    "every kind": [_span(10 + kind.value, kind=kind) for kind in SpanKind],
    "statuses": [
        _span(20, status=Status(StatusCode.ERROR, "fetch failed: £")),
        _span(21, status=Status(StatusCode.OK)),
        _span(22, status=Status(StatusCode.ERROR)),
    ],
    "trace state and a local parent": [
        _span(30, parent=LOCAL_PARENT, trace_state=TraceState([("vendor", "v1"), ("other", "x")]))
    ],
    "events and links": [
        _span(
            40,
            events=(Event("retry", {"attempt": 2}, timestamp=1_700_000_000_100_000_000), Event("plain", None)),
            links=(Link(REMOTE_PARENT, {"why": "follows"}), Link(LOCAL_PARENT)),
        )
    ],
    "an empty name and no times": [_span(50, name="", start_time=None, end_time=None)],
    "resources and scopes interleaved": [
        _span(60),
        _span(61, resource=OTHER_RESOURCE),
        _span(62, scope=VERSIONED_SCOPE),
        _span(63, scope=None),
        _span(64, resource=OTHER_RESOURCE, scope=VERSIONED_SCOPE),
        _span(65),
    ],
    "a batch of task spans": [_span(100 + n, parent=REMOTE_PARENT, attributes=ATTRIBUTES) for n in range(200)],
    "nothing": [],
}


def _parsed(data: bytes) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    message.ParseFromString(data)
    return message


@pytest.mark.parametrize("shape", SHAPES)
def test_the_request_written_is_the_message_the_sdks_encoder_makes(shape: str) -> None:
    spans = SHAPES[shape]
    ours = _parsed(encode_spans(spans))
    assert ours == sdk_encode_spans(spans)
    assert ours.SerializeToString(deterministic=True) == sdk_encode_spans(spans).SerializeToString(deterministic=True)


def test_the_same_resource_met_again_in_a_later_batch_is_encoded_alike() -> None:
    first, second = encode_spans([_span(1)]), encode_spans([_span(1)])
    assert first == second
    assert _parsed(second) == sdk_encode_spans([_span(1)])


def test_an_attribute_otlp_cannot_carry_is_left_out_with_a_log_line_as_the_sdk_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attributes = {"kept": 1, "too big": 2**64, "an object": object(), "lone surrogate": "\ud800", "key \ud800": 2}
    span = _span(1, attributes=attributes)
    with caplog.at_level(logging.ERROR):
        ours = _parsed(encode_spans([span]))
    (attribute,) = ours.resource_spans[0].scope_spans[0].spans[0].attributes
    assert (attribute.key, attribute.value.int_value) == ("kept", 1)
    assert len([r for r in caplog.records if "left out" in r.getMessage()]) == 4
