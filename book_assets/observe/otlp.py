"""OTLP/HTTP span export with the request's protobuf written directly: the SDK's exporter, its encoder replaced.

The SDK's exporter encodes a batch by building the generated protobuf classes' objects, one per span, per
attribute and per value, and serializing them: about 40 µs of the worker's CPU per task span, half of what a
kept task span costs and more than 1 % of an http crawl's page. :func:`encode_spans` writes the same message's
bytes (``ExportTraceServiceRequest``, opentelemetry-proto 1.x) field by field, spans grouped by resource and
scope as the SDK groups them, with what is the same for every span of a process (a resource, a scope, an
attribute's key) encoded once, and the one-byte lengths (nearly all) looked up: about a fifth of the SDK
encoder's CPU (12 µs a task span against 59, ``benchmarks/observe_bench.py --shapes-only``, ``encode_cpu_us``).
A test holds that what it writes parses, with the generated classes, into the message the SDK's encoder
makes, for spans of every shape the SDK can hand over (events, links, trace state, statuses, attributes of
every type OTLP carries).

:class:`OTLPSpanExporter` is the SDK's OTLP/HTTP exporter (endpoint, headers, TLS, compression, timeouts and
retries as the SDK reads them) with :func:`encode_spans` as its encoder; ``OTEL_TRACES_EXPORTER=otlp`` with the
http/protobuf protocol makes it (:data:`book_assets.observe.tracing.KNOWN_EXPORTERS`).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.exporter.otlp.proto.http._common import RequestPayloadTooLargeError, _is_request_too_large
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as SdkOTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.semconv.attributes.http_attributes import HTTP_RESPONSE_STATUS_CODE
from opentelemetry.trace import SpanContext

log = logging.getLogger(__name__)

_DOUBLE: Final = struct.Struct("<d")
_FIXED64: Final = struct.Struct("<Q")
_FIXED32: Final = struct.Struct("<I")
#: ``SpanFlags``: the span says whether its parent is remote, and (second bit) that it is.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: Encoded attribute keys kept at most (the keys of a process's spans are a handful; this bounds a stray one).
_KEYS_KEPT: Final = 4096


#: The varints of 0 .. 127: one byte each.
_SMALL: Final = tuple(bytes((n,)) for n in range(0x80))


def _varint(n: int) -> bytes:
    """``n`` (0 .. 2**64 - 1) as a protobuf varint."""
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _delimited(tag: bytes, body: bytes) -> bytes:
    """A length-delimited field: its tag, the body's length, the body."""
    return tag + _varint(len(body)) + body


def _string(tag: bytes, text: str | None) -> bytes:
    """A proto3 string field, absent when empty."""
    return _delimited(tag, text.encode()) if text else b""


def _uint(tag: bytes, n: int) -> bytes:
    """A proto3 varint field, absent when 0."""
    return tag + _varint(n) if n else b""


class _Unencodable(ValueError):
    """A value OTLP has no field for (an object of another type, an integer beyond 64 bits)."""


def _any_value(value: Any) -> bytes:
    """An ``AnyValue``'s fields (a oneof: the field set is written, even with its type's default)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _delimited(b"\x0a", value.encode())
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise _Unencodable(f"{value} does not fit in 64 bits")
        return b"\x18" + _varint(value % 2**64)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, bytes):
        return _delimited(b"\x3a", value)
    if isinstance(value, Sequence):
        return _delimited(b"\x2a", b"".join(_delimited(b"\x0a", _any_value(v)) for v in value))
    if isinstance(value, Mapping):
        return _delimited(b"\x32", b"".join(_delimited(b"\x0a", _key_value(str(k), v)) for k, v in value.items()))
    raise _Unencodable(f"type {type(value).__name__}")


_keys: dict[str, bytes] = {}


def _key(key: str) -> bytes:
    """A ``KeyValue``'s key field, encoded once per key."""
    head = _keys.get(key)
    if head is None:
        head = _string(b"\x0a", key)
        if len(_keys) < _KEYS_KEPT:
            _keys[key] = head
    return head


def _key_value(key: str, value: Any) -> bytes:
    """A ``KeyValue``'s fields."""
    return _key(key) + _delimited(b"\x12", _any_value(value))


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
    """Repeated ``KeyValue`` fields; an attribute OTLP cannot carry is left out and logged, as the SDK does.
    A float, a string and a non-negative int (what a task span holds) are encoded here, the rest by
    :func:`_any_value`; a length under 128 (nearly every one) is its own one-byte varint, looked up."""
    if not attributes:
        return b""
    parts: list[bytes] = []
    small = _SMALL
    for key, value in attributes.items():
        kind = type(value)
        try:
            if kind is float:
                any_value = b"\x21" + _DOUBLE.pack(value)
            elif kind is str:
                raw = value.encode()
                any_value = b"\x0a" + (small[len(raw)] if len(raw) < 0x80 else _varint(len(raw))) + raw
            elif kind is int and 0 <= value <= _INT64_MAX:
                any_value = b"\x18" + (small[value] if value < 0x80 else _varint(value))
            else:
                any_value = _any_value(value)
            key_field = _keys.get(key) or _key(key)
        except ValueError as exc:  # _Unencodable, or a key or value that is not Unicode text (a lone surrogate)
            log.error("span attribute %r left out: OTLP cannot carry it: %s", key, exc)
            continue
        size = len(any_value)
        value_field = (small[size] if size < 0x80 else _varint(size)) + any_value
        size = len(key_field) + 1 + len(value_field)
        parts += (tag, small[size] if size < 0x80 else _varint(size), key_field, b"\x12", value_field)
    return b"".join(parts)


def _flags(context: SpanContext | None) -> int:
    return _HAS_IS_REMOTE | _IS_REMOTE if context is not None and context.is_remote else _HAS_IS_REMOTE


def _span(span: ReadableSpan) -> bytes:
    """A ``Span``'s fields, in field order."""
    context = span.get_span_context()
    assert context is not None  # a ReadableSpan the SDK hands over always has one
    parent = span.parent
    status = span.status
    parts = [
        b"\x0a\x10",
        context.trace_id.to_bytes(16, "big"),
        b"\x12\x08",
        context.span_id.to_bytes(8, "big"),
    ]
    if context.trace_state:
        parts.append(_string(b"\x1a", ",".join(f"{k}={v}" for k, v in context.trace_state.items())))
    if parent is not None:
        parts += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
    parts += (
        _string(b"\x2a", span.name),
        _uint(b"\x30", span.kind.value + 1),  # SpanKind INTERNAL (0) is SPAN_KIND_INTERNAL (1), and so on
        b"\x39" + _FIXED64.pack(span.start_time) if span.start_time else b"",
        b"\x41" + _FIXED64.pack(span.end_time) if span.end_time else b"",
        _attributes(b"\x4a", span.attributes),
        _uint(b"\x50", span.dropped_attributes),
    )
    for event in span.events:
        parts.append(
            _delimited(
                b"\x5a",
                _string(b"\x12", event.name)
                + (b"\x09" + _FIXED64.pack(event.timestamp) if event.timestamp else b"")
                + _attributes(b"\x1a", event.attributes)
                + _uint(b"\x20", event.dropped_attributes),
            )
        )
    parts.append(_uint(b"\x60", span.dropped_events))
    for link in span.links:
        parts.append(
            _delimited(
                b"\x6a",
                b"\x0a\x10"
                + link.context.trace_id.to_bytes(16, "big")
                + b"\x12\x08"
                + link.context.span_id.to_bytes(8, "big")
                + _attributes(b"\x22", link.attributes)
                + _uint(b"\x28", link.dropped_attributes)
                + b"\x35"
                + _FIXED32.pack(_flags(link.context)),
            )
        )
    parts += (
        _uint(b"\x70", span.dropped_links),
        _delimited(b"\x7a", _string(b"\x12", status.description) + _uint(b"\x18", status.status_code.value)),
        b"\x85\x01" + _FIXED32.pack(_flags(parent)),
    )
    return b"".join(parts)


def _resource(resource: Resource) -> bytes:
    return _attributes(b"\x0a", resource.attributes)


def _scope(scope: InstrumentationScope | None) -> bytes:
    if scope is None:
        return b""
    return _string(b"\x0a", scope.name) + _string(b"\x12", scope.version) + _attributes(b"\x1a", scope.attributes)


#: Resources and scopes met, by identity: the object (kept, so its id stays its own) and its two encoded fields.
_encoded: dict[int, tuple[object, bytes, bytes]] = {}
#: Resources and scopes kept encoded at most (a process has one resource and a scope per instrumentation).
_ENCODED_KEPT: Final = 64


def _head_and_schema(part: Resource | InstrumentationScope | None) -> tuple[bytes, bytes]:
    """A resource's (or a scope's) field of its ``ResourceSpans`` (``ScopeSpans``) and that message's
    ``schema_url`` field, encoded once per object."""
    known = _encoded.get(id(part))
    if known is None or known[0] is not part:
        if isinstance(part, Resource):
            known = (part, _delimited(b"\x0a", _resource(part)), _string(b"\x1a", part.schema_url))
        else:
            known = (part, _delimited(b"\x0a", _scope(part)), _string(b"\x1a", part.schema_url if part else None))
        if len(_encoded) >= _ENCODED_KEPT:
            _encoded.clear()
        _encoded[id(part)] = known
    return known[1], known[2]


def encode_spans(spans: Sequence[ReadableSpan]) -> bytes:
    """An ``ExportTraceServiceRequest`` of ``spans``, serialized: one ``ResourceSpans`` per resource, one
    ``ScopeSpans`` per scope in it, each in the order first met (as the SDK's encoder groups them)."""
    grouped: dict[int, tuple[Resource, dict[int, tuple[InstrumentationScope | None, list[bytes]]]]] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope or None
        scopes = grouped.setdefault(id(resource), (resource, {}))[1]
        scopes.setdefault(id(scope), (scope, []))[1].append(_delimited(b"\x12", _span(span)))
    request = []
    for resource, scopes in grouped.values():
        head, schema = _head_and_schema(resource)
        body = [head]
        for scope, encoded in scopes.values():
            scope_head, scope_schema = _head_and_schema(scope)
            body.append(_delimited(b"\x12", b"".join((scope_head, *encoded, scope_schema))))
        body.append(schema)
        request.append(_delimited(b"\x0a", b"".join(body)))
    return b"".join(request)


class OTLPSpanExporter(SdkOTLPSpanExporter):
    """The SDK's OTLP/HTTP span exporter, its requests encoded by :func:`encode_spans`."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            log.warning("Exporter already shutdown, ignoring batch")
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            try:
                data = encode_spans(spans)
            except Exception as error:  # as the SDK's exporter: a batch that cannot be encoded is one failure
                log.error("Failed to encode span batch: %s", error)
                result.error = error
                return SpanExportResult.FAILURE
            if _is_request_too_large(data, self._max_request_size):
                log.warning(
                    "Dropping span batch: serialized size %d bytes exceeds max_request_size %d bytes.",
                    len(data),
                    self._max_request_size,
                )
                result.error = RequestPayloadTooLargeError(
                    f"Serialized span request size {len(data)} bytes exceeds max_request_size "
                    f"{self._max_request_size} bytes."
                )
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                status = sent.status_code
                result.error_attrs = None if status is None else {HTTP_RESPONSE_STATUS_CODE: status}
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
