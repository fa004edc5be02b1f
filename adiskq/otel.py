"""OpenTelemetry beside adiskq (``pip install "adiskq[otel]"``): continue a producer's trace where a
message is processed.

With ``opentelemetry-api`` installed, producers, consumers and groups made after a meter provider
is set record metrics on it by themselves (``adiskq/_async/metrics.py`` lists them;
``ADISKQ_METRICS=off`` turns them off), and a producer made after a tracer provider is set starts a
``send`` span for each ``push`` and carries its context in the message's ``traceparent`` header.
This module reads it back::

    from opentelemetry import trace
    import adiskq.otel

    tracer = trace.get_tracer("billing")
    async for message in group:
        with tracer.start_as_current_span("bill", context=adiskq.otel.context_of(message),
                                          kind=trace.SpanKind.CONSUMER):
            ...
"""

from __future__ import annotations

from ._extras import needs_extra
from ._sansio.values import Message

with needs_extra("otel", "adiskq.otel"):
    from opentelemetry import propagate
    from opentelemetry.context import Context

__all__ = ["context_of"]


def context_of(message: Message) -> Context:
    """The trace context the message's producer sent it with (an empty context if it carries none)."""
    carrier = {name: value.decode("latin-1") for name, value in message.headers.items()}
    return propagate.extract(carrier)
