"""The file-mailbox transport: publish observations, then receive, claim and parse responses.

All endpoint I/O goes through the endpoint's held directories. Tampering with the
endpoint is typed wherever it is seen: `deliver` raises `EndpointTamperedError` (an
OSError: map it to the protocol error `endpoint_tampered`), `await_decision` returns
that protocol error, and `close` records it and returns.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mailroom.hashing import sha256_bytes
from mailroom.mailbox.endpoint import Endpoint, held_endpoint
from mailroom.mailbox.held_directories import EndpointTamperedError
from mailroom.mailbox.inbox_hub import InboxHub
from mailroom.mailbox.messages import Closed, to_document
from mailroom.mailbox.parser import ActionLimits, Invalid, ProtocolError
from mailroom.mailbox.publish import (
    OutboxDurability,
    document_bytes,
    publish_all_to_outbox,
    publish_to_outbox,
)
from mailroom.mailbox.quota import Usage, endpoint_usage
from mailroom.mailbox.receiver import (
    Reception,
    ResponseReceiver,
    Silence,
    StrayResponse,
    response_sequence,
)
from mailroom.mailbox.watcher import (
    DEFAULT_SCAN_INTERVAL,
    POLLING_INTERVAL,
    InboxWatcher,
    WatchMode,
)
from mailroom.measures import CLOCK
from mailroom.orchestrator.transport.base import Arrival, DecisionOutcome, Delivery, TimedOut
from mailroom.orchestrator.transport.evidence_sink import EvidenceSink
from mailroom.orchestrator.transport.observation import observation_document
from mailroom.orchestrator.transport.png import encode_png

if TYPE_CHECKING:
    from mailroom.orchestrator.sim.base import Capture


def _stray_fields(stray: StrayResponse) -> dict[str, object]:
    return {
        "stray_kind": stray.kind,
        "name": stray.name,
        "stray_sequence": stray.sequence,
        "bytes": stray.size,
        "sha256": stray.sha256,
        "claim_error": None if stray.claim_error is None else stray.claim_error.value,
    }


class MailboxTransport:
    def __init__(
        self,
        endpoint: Endpoint,
        evidence: EvidenceSink,
        watch_mode: WatchMode = "inotify",
        scan_interval: float = DEFAULT_SCAN_INTERVAL,
        keep_images: bool = True,
        polling_interval: float = POLLING_INTERVAL,
        outbox_durability: OutboxDurability = "atomic",
        hub: InboxHub | None = None,
    ) -> None:
        self.endpoint = held_endpoint(endpoint)
        # Outbox files are always atomic; fsynced only when the run declares it.
        self.durable = outbox_durability == "durable"
        self.dirs = self.endpoint.held
        self.evidence = evidence
        self.keep_images = keep_images
        self.watcher = InboxWatcher(
            self.dirs.watch_path("inbox"),
            mode=watch_mode,
            scan_interval=scan_interval,
            polling_interval=polling_interval,
            hub=hub,
            counts=lambda name: response_sequence(name) is not None,
        )
        self.receiver = ResponseReceiver(self.endpoint, evidence.responses_dir, self.watcher)
        self.watcher.start()
        self._encoded: tuple[Capture, dict[str, bytes]] | None = None
        self._fallback_recorded = False
        self._arrival = Arrival.now()

    def _png(self, capture: Capture) -> dict[str, bytes]:
        # A re-delivered capture (after a rejection) is the same object: encode it once.
        if self._encoded is None or self._encoded[0] is not capture:
            with CLOCK.phase("encode"):
                encoded = {c: encode_png(img) for c, img in capture.images.items()}
            self._encoded = (capture, encoded)
        return self._encoded[1]

    def _publish(self, sequence: int, items: list[tuple[str, bytes]]) -> None:
        """Publish `items`; the check that the endpoint is still as created comes after
        the decision cycle (`_check_published`), while the actor reads."""
        try:
            with CLOCK.phase("publish"):
                publish_all_to_outbox(self.dirs, items, durable=self.durable, check_after=False)
        except EndpointTamperedError as exc:
            self._record_tampered(sequence, exc)
            raise

    def _check_published(self, sequence: int) -> None:
        try:
            self.dirs.check()
        except EndpointTamperedError as exc:
            self._record_tampered(sequence, exc)
            raise

    def _record_tampered(self, sequence: int, exc: EndpointTamperedError) -> None:
        self.evidence.event(
            "endpoint_tampered", sequence=sequence, stage="publish", message=str(exc)
        )

    def deliver(self, delivery: Delivery) -> None:
        """Publish observation `delivery.sequence`; `EndpointTamperedError` if tampered."""
        pngs = self._png(delivery.capture)
        images = [
            (self.endpoint.image_file(delivery.sequence, camera).name, data)
            for camera, data in pngs.items()
        ]
        with CLOCK.phase("observation_document"):
            document = observation_document(delivery, self.endpoint)
            body = document_bytes(document)
        name = self.endpoint.observation_file(delivery.sequence).name
        self.watcher.forget_arrivals()  # from here on, an arrival answers this one
        if delivery.sequence == 1:
            # On record before the actor can see anything: an attempt killed during
            # this publication is never re-run as if nothing had been shown.
            self.evidence.event("first_observation_publishing", request_id=delivery.request_id)
        # Images first: once obs-<n>.json is visible, everything it names is there.
        self._publish(delivery.sequence, [*images, (name, body)])
        self.receiver.published_at = time.monotonic()
        # The actor may read the observation from here on: the decision cycle ends, and
        # what the actor does not need is done now, while it works: first the check that
        # the endpoint is still as created, then the event, so a crash leaves the
        # publication on record as soon as possible.
        CLOCK.end_cycle()
        with CLOCK.phase("after_publication"):
            self._check_published(delivery.sequence)
            self.evidence.event(
                "observation_published",
                sequence=delivery.sequence,
                request_id=delivery.request_id,
                image_sha256={camera: sha256_bytes(data) for camera, data in pngs.items()},
                feedback=document["feedback"],
            )
            if self.keep_images:
                for image_name, data in images:
                    self.evidence.keep_observation_file(image_name, data)
            self.evidence.keep_observation_file(name, body)

    def usage(self, max_entries: int) -> Usage:
        """What the actor keeps in its endpoint (outbox/ excluded), bounded by `max_entries`."""
        return endpoint_usage(self.endpoint, max_entries)

    def _record_fallback(self) -> None:
        reason = self.watcher.fallback_reason
        if reason is not None and not self._fallback_recorded:
            self._fallback_recorded = True
            self.evidence.event(
                "watcher_fell_back", reason=reason.value, detail=self.watcher.fallback_detail
            )

    def _record(self, sequence: int, received: Reception) -> None:
        outcome = received.outcome
        if received.stray is not None:
            self.evidence.event(
                "stray_response", sequence=sequence, **_stray_fields(received.stray)
            )
        if received.claimed is None:
            assert isinstance(outcome, ProtocolError)
            self.evidence.event(
                "response_rejected",
                sequence=sequence,
                name=received.name,
                outcome=outcome.kind,
                reason=outcome.reason.value,
                message=outcome.message,
            )
            return
        detail: dict[str, object] = {"outcome": outcome.kind}
        if isinstance(outcome, Invalid):
            detail["reasons"] = [i.code for i in outcome.issues]
        elif isinstance(outcome, ProtocolError):
            detail["reason"] = outcome.reason.value
        else:
            detail["decision"] = outcome.decision
            detail["chunk_length"] = len(outcome.actions)
        data = received.claimed.data
        self.evidence.event(
            "response_claimed",
            sequence=sequence,
            bytes=len(data),
            sha256=sha256_bytes(data),
            **detail,
        )

    def await_decision(
        self, delivery: Delivery, limits: ActionLimits, timeout_s: float
    ) -> DecisionOutcome:
        received = self.receiver.receive(delivery.sequence, delivery.request_id, limits, timeout_s)
        self._record_fallback()
        if isinstance(received, Silence):
            return TimedOut(waited_s=received.waited_s)
        return self._decided(delivery, received)

    def poll_decision(
        self, delivery: Delivery, limits: ActionLimits, deadline: float | None = None
    ) -> DecisionOutcome | None:
        received = self.receiver.try_receive(
            delivery.sequence, delivery.request_id, limits, deadline
        )
        self._record_fallback()
        return None if received is None else self._decided(delivery, received)

    def arrival(self) -> Arrival:
        return self._arrival

    def unseen_since(self) -> float | None:
        return self.watcher.unseen_since()

    @property
    def recheck_interval(self) -> float:
        return self.watcher.recheck_interval

    def _decided(self, delivery: Delivery, received: Reception) -> DecisionOutcome:
        watcher = self.watcher
        served = watcher.found_monotonic
        # When the file judged arrived (an event's time, or for a file a scan found its
        # status-change time): its wait until now is queueing delay, not actor latency.
        arrived = received.arrived_at
        self._arrival = Arrival(served if arrived is None else min(arrived, served), served)
        CLOCK.mark("response_detected_at", watcher.found_at)
        CLOCK.mark("claim_parse", time.perf_counter() - watcher.found_at)
        self._record(delivery.sequence, received)
        return received.outcome

    def sweep_late(self) -> int:
        """Take responses that arrived after the close as evidence; they change nothing.

        `close` sweeps once; call it again after the actor has stopped, before the
        evidence is closed.
        """
        late = self.receiver.sweep_late()
        for stray in late:
            self.evidence.event("late_response", **_stray_fields(stray))
        return len(late)

    def close(self, last_sequence: int) -> None:
        """Publish the closed notice and sweep once. Never raises for the endpoint's state:
        a notice that cannot be published is recorded (`closed_not_published`)."""
        try:
            body = document_bytes(to_document(Closed(last_sequence=last_sequence)))
            try:
                publish_to_outbox(
                    self.dirs, self.endpoint.closed_file.name, body, durable=self.durable
                )
            except OSError as exc:
                tampering = isinstance(exc, EndpointTamperedError)
                self.evidence.event(
                    "closed_not_published",
                    last_sequence=last_sequence,
                    reason="endpoint_tampered" if tampering else "io_error",
                    message=str(exc) if tampering else (exc.strerror or type(exc).__name__),
                )
            else:
                self.evidence.event("closed_published", last_sequence=last_sequence)
            self.sweep_late()
        finally:
            self.watcher.stop()
            self._record_fallback()
