"""The Kafka wire protocol without I/O: bytes in, requests out; responses in, bytes out.

Everything here is sans-IO (no sockets, no event loop; ``tests/test_layers.py`` pins it), and imports
only itself, the log's codec (``adiskq._sansio``) and the bottom modules:

- ``protocol``: frames, request and response headers, payloads through kio; ``request_guard``
  checks a request's counts and lengths before kio reads it; ``framing`` cuts a byte stream into
  frames; ``fast_responses`` writes the hot answers (Produce, Fetch) without kio;
- ``codec`` (Kafka's record batch v2, with ``compression``) and ``batch``, which the gateway
  imports: the compiled codec's functions, or the reference's;
- ``mapping`` (Kafka records as stored records, and the rules between the two), ``stored_batch``
  (stored records straight to a Kafka batch), ``fetch_request``, ``produce_request`` and
  ``fetch_answer`` (a request read, or an answer written, in one compiled call), sharing
  ``request_reader``.

Each module with a compiled twin in ``adiskq/_csrc`` is that twin's pure-Python reference.
"""
