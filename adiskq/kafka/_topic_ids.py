"""Topic ids: since Kafka 2.8 a topic is also named by a UUID (Metadata v10+, Fetch v13+).

A topic's id is derived from its name (``GatewayCore.topic_id``: a UUID5 under a fixed namespace),
so it is the same for every client and across restarts without being stored anywhere. The other
way, an id's name, is found by deriving the ids of the topics under the root and remembering them;
an id not remembered, or whose topic is gone, lists the root again (a topic created meanwhile).
"""

from __future__ import annotations

from ._core import GatewayCore

__all__ = ["TopicIds"]

_KEY = "topic_ids"


class TopicIds:
    """Topic id -> name for one gateway's root."""

    def __init__(self, gateway: GatewayCore) -> None:
        self._gateway = gateway
        self._names: dict[bytes, str] = {}  # by the id's 16 bytes

    @staticmethod
    def of(gateway: GatewayCore) -> TopicIds:
        """The gateway's table (made on first use, kept in ``gateway.extensions``)."""
        table = gateway.extensions.get(_KEY)
        if not isinstance(table, TopicIds):
            table = gateway.extensions[_KEY] = TopicIds(gateway)
        return table

    def name_of(self, topic_id: bytes) -> str | None:
        """The name of the topic with that id (its 16 bytes, as a Fetch carries it), or None when no
        topic under the root has it."""
        topics = self._gateway.topics
        name = self._names.get(topic_id)
        if name is None or not topics.exists(name):
            self._names = {self._gateway.topic_id(known).bytes: known for known in topics.names()}
            name = self._names.get(topic_id)
        return name
