"""SQLAlchemy tables. Rows stay inside ``infra``; repositories return domain objects."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, DateTime, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class ResourceRow(Base):
    """One stored custom resource (a DGDR, a BenchmarkJob, ...), Kubernetes-style.

    ``resource_version`` is bumped on every write and checked on conditional writes
    (optimistic concurrency); ``generation`` is bumped only when the spec changes.

    The outbox and the lease (``infra.outbox``, ``infra.leases``; never part of the object, never
    a new resource version): ``publish_due_at`` is when a dispatcher should next publish the task
    for this resource (None: nothing to publish); ``published_at`` when it was last published, until
    a worker takes it or it is claimed again; ``lease_owner`` is the worker working on it (or holding
    its delivered message) until ``lease_expires_at`` unless it renews the lease.

    ``object_json`` is the object as the API sends it (``infra.resources.to_object``, JSON text),
    written with every write; None for a row stored before it was kept.
    """

    __tablename__ = "slaplan_resources"
    __table_args__ = (
        UniqueConstraint("group", "plural", "namespace", "name", name="uq_slaplan_resources_identity"),
        UniqueConstraint("uid", name="uq_slaplan_resources_uid"),
        Index("ix_slaplan_resources_publish_due", "publish_due_at"),
        Index("ix_slaplan_resources_lease_expiry", "lease_expires_at"),
        Index("ix_slaplan_resources_published", "published_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    group: Mapped[str] = mapped_column(String(253))
    version: Mapped[str] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(63))
    plural: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    uid: Mapped[str] = mapped_column(String(36))
    generation: Mapped[int] = mapped_column(Integer, default=1)
    resource_version: Mapped[int] = mapped_column(BigInteger, default=1)
    labels: Mapped[dict] = mapped_column(JSON, default=dict)
    annotations: Mapped[dict] = mapped_column(JSON, default=dict)
    spec: Mapped[dict] = mapped_column(JSON, default=dict)
    status: Mapped[dict] = mapped_column(JSON, default=dict)
    managed_fields: Mapped[list] = mapped_column(JSON, default=list, server_default="[]")  # metadata.managedFields
    object_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    publish_due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class CalibrationRow(Base):
    """The parameters fitted to measurements of one (model, GPU, backend), and where they came from."""

    __tablename__ = "slaplan_calibrations"
    __table_args__ = (UniqueConstraint("model", "gpu", "backend", name="uq_slaplan_calibrations_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(String(253))
    gpu: Mapped[str] = mapped_column(String(63))
    backend: Mapped[str] = mapped_column(String(31))
    params: Mapped[dict] = mapped_column(JSON)
    deployment: Mapped[dict] = mapped_column(JSON)
    fit: Mapped[dict] = mapped_column(JSON)  # scale, fitted names, points, errors before and after
    source: Mapped[str] = mapped_column(String(1024))
    calibrated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ResourceEventRow(Base):
    """One change to a stored resource, kept for watches: ``version`` is the resource version the
    change produced (ADDED, MODIFIED or DELETED), ``object`` the resource as it was then.

    ``prior_labels`` are the labels before a MODIFIED change, so that a watch with a label
    selector can tell an object entering or leaving the selection.
    """

    __tablename__ = "slaplan_resource_events"
    __table_args__ = (Index("ix_slaplan_resource_events_kind", "group", "plural", "version"),)

    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(16))
    group: Mapped[str] = mapped_column(String(253))
    plural: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(63))
    labels: Mapped[dict] = mapped_column(JSON, default=dict)
    prior_labels: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    object: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CounterRow(Base):
    """Named counters. ``resource_version``: the last resource version handed out, one for the
    whole table; it is bumped (and so row-locked) first in every write, which makes versions
    grow in commit order. ``events_compacted``: every event up to this version was pruned."""

    __tablename__ = "slaplan_counters"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


class MeasuredRunRow(Base):
    """One run an online search measured (``planner.run_reuse.StoredRun``), kept for later searches
    of the same workload."""

    __tablename__ = "slaplan_measured_runs"
    __table_args__ = (Index("ix_slaplan_measured_runs_workload", "workload"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workload: Mapped[str] = mapped_column(String(64))
    unit: Mapped[str] = mapped_column(String(253))
    settings: Mapped[str] = mapped_column(String(64))
    concurrency: Mapped[int] = mapped_column(Integer)
    run: Mapped[dict] = mapped_column(JSON)  # the StoredRun as JSON
    measured_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
