-- xtimer schema for PostgreSQL 13+, for teams whose DBAs apply schema by
-- hand. It describes the same tables as (*store.Store).Migrate (GORM
-- AutoMigrate); store/schema_test.go applies this file to a fresh database
-- and checks that every column and index of the models exists and that
-- AutoMigrate afterwards changes nothing.
--
-- All instants are BIGINT milliseconds since the Unix epoch, UTC; 0 means
-- "not yet" or "none". Rows of several apps may share the tables.

CREATE TABLE IF NOT EXISTS xtimer_tasks (
  id                bigserial    NOT NULL,
  app               varchar(64)  NOT NULL,
  code              varchar(128) NOT NULL,
  name              varchar(255) NOT NULL DEFAULT '',
  description       text         NOT NULL,
  owner             varchar(255) NOT NULL DEFAULT '',
  kind              varchar(16)  NOT NULL DEFAULT 'func',   -- func | http
  spec              varchar(255) NOT NULL,
  dialect           varchar(16)  NOT NULL DEFAULT '',
  time_zone         varchar(64)  NOT NULL DEFAULT 'UTC',
  status            varchar(16)  NOT NULL DEFAULT 'active', -- active | paused
  timeout_ms        bigint       NOT NULL DEFAULT 0,
  max_attempts      bigint       NOT NULL DEFAULT 1,        -- counts the first attempt
  backoff_base_ms   bigint       NOT NULL DEFAULT 0,
  backoff_max_ms    bigint       NOT NULL DEFAULT 0,
  misfire           varchar(16)  NOT NULL DEFAULT '',
  misfire_window_ms bigint       NOT NULL DEFAULT 0,
  overlap           varchar(16)  NOT NULL DEFAULT '',
  end_at_ms         bigint       NOT NULL DEFAULT 0,
  max_runs          bigint       NOT NULL DEFAULT 0,
  jitter_ms           bigint       NOT NULL DEFAULT 0,         -- start spread over [0, jitter_ms) after the nominal instant
  pause_after         bigint       NOT NULL DEFAULT 0,         -- consecutive failures that pause the task; 0 never
  shards              bigint       NOT NULL DEFAULT 0,         -- shards of each fire (WithShards); 0 none
  broadcast           boolean      NOT NULL DEFAULT false,     -- one shard per live replica (WithBroadcast)
  exclude_days        varchar(2048) NOT NULL DEFAULT '',       -- YYYY-MM-DD,... in the task's zone
  calendar            varchar(64)  NOT NULL DEFAULT '',        -- a calendar of xtimer_calendars
  params              text         NULL,                      -- JSON of WithParams; NULL none
  http_target       text         NULL,                      -- JSON, kind http
  spec_override     varchar(255) NULL,                      -- console edits, win until reset
  dialect_override  varchar(16)  NULL,
  tz_override       varchar(64)  NULL,
  option_overrides  text         NULL,                      -- JSON of SetTaskOptions; NULL none
  pause_note          varchar(1024) NOT NULL DEFAULT '',       -- why it was last paused or resumed
  created_ms        bigint       NOT NULL DEFAULT 0,
  updated_ms        bigint       NOT NULL DEFAULT 0,
  version           bigint       NOT NULL DEFAULT 0,        -- +1 on every change
  PRIMARY KEY (id)
);
CREATE UNIQUE INDEX IF NOT EXISTS xtimer_tasks_app_code ON xtimer_tasks (app, code);
-- The console's task search (a substring of code or name, any case) reads
-- these trigram indexes; the name's holds only the names that are not the
-- task's code (the code's index finds the others). pg_trgm is a trusted
-- extension: the database's owner may create it. Without it (and these two
-- indexes) the search scans the app's tasks: correct, slow on a large app.
-- Earlier versions indexed every name as xtimer_tasks_name_trgm, which
-- Migrate drops.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS xtimer_tasks_code_trgm ON xtimer_tasks USING gin (lower(code) gin_trgm_ops);
CREATE INDEX IF NOT EXISTS xtimer_tasks_own_name_trgm ON xtimer_tasks USING gin (lower(name) gin_trgm_ops) WHERE name <> code;

CREATE TABLE IF NOT EXISTS xtimer_apps (
  app      varchar(64)  NOT NULL,
  task_gen bigint       NOT NULL DEFAULT 0,                   -- +1 on every change to the app's tasks
  reg_digest varchar(64) NOT NULL DEFAULT '',                -- the tasks of the last registration, hashed
  reg_gen  bigint       NOT NULL DEFAULT 0,                   -- task_gen at its commit
  reg_pending_ms bigint NOT NULL DEFAULT 0,                  -- created_ms of the rows of a registration still being written; 0 none
  reg_written varchar(4096) NOT NULL DEFAULT '',             -- its chunks written: '1' or '0' each
  reg_uniform_ms bigint NOT NULL DEFAULT 0,                 -- created_ms of the last deferred registration's rows; 0 none
  reg_uniform_digest varchar(64) NOT NULL DEFAULT '',      -- the digest of its tasks
  PRIMARY KEY (app)
);

CREATE TABLE IF NOT EXISTS xtimer_executions (
  id              bigserial    NOT NULL,
  app             varchar(64)  NOT NULL,
  task_code       varchar(128) NOT NULL,
  run_time        bigint       NOT NULL,                    -- the fire's planned instant
  shard           bigint       NOT NULL DEFAULT 0,          -- the shard's index; 0 unsharded
  shards          bigint       NOT NULL DEFAULT 0,          -- shards of the fire; 0 unsharded
  broadcast       boolean      NOT NULL DEFAULT false,      -- a broadcast shard: its replica's or nobody's
  status          varchar(16)  NOT NULL,                    -- scheduled running retrying succeeded failed timed_out skipped
  reason          varchar(64)  NOT NULL DEFAULT '',         -- paused overlap misfire "replica lost" ...
  source          varchar(16)  NOT NULL DEFAULT 'schedule', -- schedule manual retry catchup
  attempt         bigint       NOT NULL DEFAULT 0,          -- attempt running or last run; 1 = first
  max_attempts    bigint       NOT NULL DEFAULT 1,
  replica         varchar(128) NOT NULL DEFAULT '',
  claim           varchar(32)  NOT NULL DEFAULT '',         -- nonce of the insert that created the row
  scheduled_ms    bigint       NOT NULL DEFAULT 0,          -- when the row was recorded
  started_ms      bigint       NOT NULL DEFAULT 0,
  finished_ms     bigint       NOT NULL DEFAULT 0,
  lateness_ms     bigint       NOT NULL DEFAULT 0,
  duration_ms     bigint       NOT NULL DEFAULT 0,
  http_status     bigint       NOT NULL DEFAULT 0,          -- response status of the last HTTP callback attempt
  output          text         NOT NULL,
  error           text         NOT NULL,
  next_attempt_ms bigint       NOT NULL DEFAULT 0,
  updated_ms      bigint       NOT NULL DEFAULT 0,
  cancel_ms       bigint       NOT NULL DEFAULT 0,          -- when a later fire asked this run to stop (cancel_other)
  planned_ms      bigint       NOT NULL DEFAULT 0,          -- run_time plus the jitter offset; 0 = run_time
  params          text         NULL,                      -- a manual run's parameters; NULL: the task's
  note            varchar(1024) NOT NULL DEFAULT '',      -- why a manual run was triggered
  PRIMARY KEY (id)
) WITH (fillfactor = 50); -- room on each page for the start claim's HOT update (store.executionsFillFactor)
-- Five indexes, no more: every fire writes its row several times. See
-- store.Execution for which query each serves.
CREATE UNIQUE INDEX IF NOT EXISTS xtimer_executions_shard ON xtimer_executions (app, task_code, run_time, shard); -- one row per fire (per shard)
CREATE INDEX IF NOT EXISTS xtimer_executions_retrying ON xtimer_executions (app, next_attempt_ms) WHERE status = 'retrying'; -- only the rows waiting for a retry
CREATE INDEX IF NOT EXISTS xtimer_executions_status ON xtimer_executions (app, status, run_time);
CREATE INDEX IF NOT EXISTS xtimer_executions_replica_time ON xtimer_executions (app, replica, run_time);
CREATE INDEX IF NOT EXISTS xtimer_executions_time ON xtimer_executions (app, run_time);

CREATE TABLE IF NOT EXISTS xtimer_slots (
  app     varchar(64)  NOT NULL,
  minute  bigint       NOT NULL,                            -- Unix minute number (seconds / 60)
  bucket  bigint       NOT NULL,
  done    boolean      NOT NULL DEFAULT false,
  owner   varchar(128) NOT NULL DEFAULT '',
  done_ms bigint       NOT NULL DEFAULT 0,
  PRIMARY KEY (app, minute, bucket)
);

CREATE TABLE IF NOT EXISTS xtimer_replicas (
  app          varchar(64)  NOT NULL,
  id           varchar(128) NOT NULL,
  host         varchar(255) NOT NULL DEFAULT '',
  pid          bigint       NOT NULL DEFAULT 0,
  version      varchar(64)  NOT NULL DEFAULT '',
  started_ms   bigint       NOT NULL DEFAULT 0,
  heartbeat_ms bigint       NOT NULL DEFAULT 0,
  handlers     text         NULL,                           -- JSON array of task codes
  slots        text         NULL,                           -- JSON array of "minute:bucket" owned now
  clock_offset_ms bigint    NOT NULL DEFAULT 0,              -- the database's clock minus the replica's
  clock_refused boolean     NOT NULL DEFAULT false,          -- offset beyond MaxClockSkew: claims nothing
  handler_chunks bigint     NOT NULL DEFAULT 0,              -- rows of xtimer_handler_chunks holding the handlers, 0: in handlers
  PRIMARY KEY (app, id)
);
CREATE INDEX IF NOT EXISTS xtimer_replicas_heartbeat ON xtimer_replicas (app, heartbeat_ms);

-- A replica's handler list too big for one statement (store/fleet.go,
-- SetReplicaHandlers): JSON arrays of at most 1 MiB, in the order of seq,
-- replaced whole in one transaction.
CREATE TABLE IF NOT EXISTS xtimer_handler_chunks (
  app     varchar(64)  NOT NULL,
  replica varchar(128) NOT NULL,
  seq     bigint       NOT NULL,
  codes   text         NOT NULL,                           -- JSON array of task codes
  PRIMARY KEY (app, replica, seq)
);

-- The audit log of operator actions; rows are only ever inserted.
CREATE TABLE IF NOT EXISTS xtimer_actions (
  id        bigserial    NOT NULL,
  app       varchar(64)  NOT NULL,
  task_code varchar(128) NOT NULL DEFAULT '',
  at_ms     bigint       NOT NULL DEFAULT 0,
  principal varchar(255) NOT NULL DEFAULT '',               -- who
  action    varchar(32)  NOT NULL,                          -- pause resume trigger set_schedule reset_schedule ...
  detail    text         NOT NULL,                          -- free text or JSON of the change
  PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS xtimer_actions_task ON xtimer_actions (app, task_code, at_ms);

-- Daily counts of final executions by task and status (rollup.go), written
-- by the retention sweep before it deletes a day's executions; never
-- deleted. A row with task_code and status '' marks its day rolled up.
CREATE TABLE IF NOT EXISTS xtimer_rollups (
  app       varchar(64)  NOT NULL,
  task_code varchar(128) NOT NULL,
  day       bigint       NOT NULL,                          -- Unix day number (UTC days since 1970-01-01)
  status    varchar(16)  NOT NULL,                          -- succeeded failed timed_out skipped
  count     bigint       NOT NULL DEFAULT 0,
  PRIMARY KEY (app, task_code, day, status)
);

-- Alert damping and delivery state, one row per app, kind and subject
-- (alerts.go): shared by the replicas so that each alert is sent once.
CREATE TABLE IF NOT EXISTS xtimer_alerts (
  id                 bigserial    NOT NULL,
  app                varchar(64)  NOT NULL,
  kind               varchar(32)  NOT NULL,
  subject            varchar(128) NOT NULL DEFAULT '',          -- task code, replica ID, or '' for the app
  occurrence         varchar(64)  NOT NULL DEFAULT '',
  window_ms          bigint       NOT NULL DEFAULT 0,           -- start of the damping window
  suppressed         bigint       NOT NULL DEFAULT 0,           -- events damped since the last alert
  last_ms            bigint       NOT NULL DEFAULT 0,
  last_event         text         NOT NULL,
  pending            text         NOT NULL,                     -- the alert being delivered, '' when none
  pending_suppressed bigint       NOT NULL DEFAULT 0,
  pending_digest     boolean      NOT NULL DEFAULT false,
  pending_since_ms   bigint       NOT NULL DEFAULT 0,           -- when the alert before the pending one was claimed
  lease              varchar(128) NOT NULL DEFAULT '',
  lease_until_ms     bigint       NOT NULL DEFAULT 0,
  tries              bigint       NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
);
CREATE UNIQUE INDEX IF NOT EXISTS xtimer_alerts_key ON xtimer_alerts (app, kind, subject);

-- Exclusion calendars, one row per app and name (calendars.go): dates on
-- which the fires of the tasks naming the calendar are skipped. A write
-- bumps xtimer_apps.task_gen in its transaction.
CREATE TABLE IF NOT EXISTS xtimer_calendars (
  app        varchar(64)  NOT NULL,
  name       varchar(64)  NOT NULL,
  days       text         NOT NULL,                         -- YYYY-MM-DD,... sorted
  updated_ms bigint       NOT NULL DEFAULT 0,
  version    bigint       NOT NULL DEFAULT 0,               -- +1 on every write
  PRIMARY KEY (app, name)
);

-- The attempts of an execution that another attempt followed (a retry),
-- copied from the execution's row before the next one overwrites it;
-- the last attempt is the row's own (attempts.go). Deleted with the
-- execution by retention.
CREATE TABLE IF NOT EXISTS xtimer_attempts (
  app          varchar(64)  NOT NULL,
  execution_id bigint       NOT NULL,                       -- xtimer_executions.id
  attempt      bigint       NOT NULL,                       -- 1 for the first attempt
  replica      varchar(128) NOT NULL DEFAULT '',
  started_ms   bigint       NOT NULL DEFAULT 0,
  finished_ms  bigint       NOT NULL DEFAULT 0,
  duration_ms  bigint       NOT NULL DEFAULT 0,
  status       varchar(16)  NOT NULL,                       -- succeeded failed timed_out
  output       text         NOT NULL,
  error        text         NOT NULL,
  http_status  bigint       NOT NULL DEFAULT 0,
  PRIMARY KEY (execution_id, attempt)
);

-- The fingerprint of the schema the last complete Migrate made: a Migrate
-- that finds its own, and every table, changes nothing and skips
-- AutoMigrate (schemamark.go). A database whose schema was applied from
-- this file has no row, so the first Migrate checks it in full and writes
-- the row.
CREATE TABLE IF NOT EXISTS xtimer_schema (
  id          bigint      NOT NULL,                       -- always 1
  fingerprint varchar(64) NOT NULL DEFAULT '',
  migrated_ms bigint      NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
);
