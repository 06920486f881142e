/**
 * The dev Core's schema as an ordered list of migrations, run on every start through `effect/sql`'s
 * `Migrator` (each pending migration in one transaction; applied ids are recorded in
 * `agentwire_migrations`). A migration is never edited once released: a change is a new entry.
 *
 * Portability (docs/store.md): the DDL uses only types and syntax PostgreSQL accepts as written (TEXT,
 * BIGINT, INTEGER, BOOLEAN, PRIMARY KEY, REFERENCES, UNIQUE, plain and partial indexes); times are Unix milliseconds in
 * BIGINT columns named `*_ms`; structured values are JSON text in `*_json` columns; booleans are BOOLEAN
 * (SQLite stores 0/1, PostgreSQL true/false; the repositories accept both).
 */
import { Effect } from "effect"
import { Migrator, SqlClient } from "effect/sql"

const initial = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // A Runtime device. `revoked_at_ms` is set while no credential may authenticate it.
  yield* sql`CREATE TABLE devices (
    device_id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    runtime_type TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT
  )`
  // Daemon credentials: only the SHA-256 digest is stored, never the credential.
  yield* sql`CREATE TABLE device_credentials (
    credential_id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL REFERENCES devices (device_id),
    digest TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT
  )`
  yield* sql`CREATE INDEX device_credentials_by_device ON device_credentials (device_id)`
  // The latest valid heartbeat of a device (liveness facts only).
  yield* sql`CREATE TABLE device_declarations (
    device_id TEXT PRIMARY KEY REFERENCES devices (device_id),
    connection_number BIGINT NOT NULL,
    daemon_version TEXT,
    active_requests INTEGER NOT NULL,
    heartbeat_ts BIGINT NOT NULL,
    received_at_ms BIGINT NOT NULL
  )`
  // One row per declared kind of that heartbeat, with the persisted capability projection (one column per field).
  yield* sql`CREATE TABLE device_kinds (
    device_id TEXT NOT NULL REFERENCES devices (device_id),
    kind TEXT NOT NULL,
    available BOOLEAN NOT NULL,
    version TEXT,
    cap_subagent_observations BOOLEAN,
    cap_streaming BOOLEAN,
    cap_permissions BOOLEAN,
    cap_usage BOOLEAN,
    cap_resume BOOLEAN,
    cap_native_session_recovery BOOLEAN,
    cap_workspace_authoring BOOLEAN,
    cap_steering BOOLEAN,
    cap_message_items BOOLEAN,
    cap_tool_observations BOOLEAN,
    cap_environment_none BOOLEAN,
    cap_local_environment BOOLEAN,
    cap_preparation BOOLEAN,
    cap_workspace_read_preparation BOOLEAN,
    cap_workspace_output_export BOOLEAN,
    cap_programmatic_tool_calling_disable BOOLEAN,
    cap_web_search_control BOOLEAN,
    cap_execution_controls BOOLEAN,
    cap_text_verbosity BOOLEAN,
    cap_structured_output BOOLEAN,
    cap_tool_search BOOLEAN,
    cap_message_images BOOLEAN,
    cap_function_result_images BOOLEAN,
    cap_subagent_control BOOLEAN,
    cap_durable_input_receipts BOOLEAN,
    cap_durable_turns BOOLEAN,
    cap_function_tools BOOLEAN,
    cap_mcp_http_tools BOOLEAN,
    cap_mcp_http_required BOOLEAN,
    cap_mcp_http_bearer_auth BOOLEAN,
    PRIMARY KEY (device_id, kind)
  )`
  // A Session: Core-owned configuration. `device_id` is bound at its first Turn.
  yield* sql`CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    agent_kind TEXT NOT NULL,
    environment_type TEXT NOT NULL,
    configuration_json TEXT NOT NULL,
    device_id TEXT REFERENCES devices (device_id),
    native_session_id TEXT,
    created_at_ms BIGINT NOT NULL
  )`
  // A Turn and its outcome. `attempt` counts delivery attempts (a preparation_capacity refusal leaves the
  // Turn unclaimed for another one); `input_cursor` counts accepted active inputs; `outcome_json` keeps the
  // whole projected outcome (the columns before it are its queryable part).
  yield* sql`CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (session_id),
    run_id TEXT NOT NULL UNIQUE,
    device_id TEXT,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    error_code TEXT,
    observation_reason TEXT,
    engine_error_code TEXT,
    engine_http_status INTEGER,
    usage_json TEXT,
    content TEXT,
    native_session_id TEXT,
    outcome_json TEXT,
    input_json TEXT NOT NULL,
    input_cursor INTEGER NOT NULL,
    created_at_ms BIGINT NOT NULL,
    dispatched_at_ms BIGINT,
    completed_at_ms BIGINT
  )`
  yield* sql`CREATE INDEX turns_by_session ON turns (session_id, created_at_ms)`
  yield* sql`CREATE INDEX turns_by_status ON turns (status)`
  // The ordered journal of a Turn: Run frames as received (`kind` 'frame', the encoded wire frame) and the
  // delivery layer's other facts (`kind` 'fact', the encoded TurnFact), in one sequence per Turn.
  yield* sql`CREATE TABLE turn_events (
    turn_id TEXT NOT NULL REFERENCES turns (turn_id),
    seq INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    kind TEXT NOT NULL,
    type TEXT NOT NULL,
    body_json TEXT NOT NULL,
    received_at_ms BIGINT NOT NULL,
    PRIMARY KEY (turn_id, seq)
  )`
  // Active inputs. `position` is set when the input is accepted (the cursor value it advanced to).
  yield* sql`CREATE TABLE turn_inputs (
    turn_id TEXT NOT NULL REFERENCES turns (turn_id),
    input_id TEXT NOT NULL,
    input_json TEXT NOT NULL,
    status TEXT NOT NULL,
    error_code TEXT,
    position INTEGER,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (turn_id, input_id)
  )`
  // Permission requests, user-choice asks and function calls, with the answer's delivery outcome.
  yield* sql`CREATE TABLE interactions (
    turn_id TEXT NOT NULL REFERENCES turns (turn_id),
    interaction_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    request_json TEXT NOT NULL,
    status TEXT NOT NULL,
    delivery_id TEXT,
    answer_json TEXT,
    outcome TEXT,
    outcome_error_code TEXT,
    created_at_ms BIGINT NOT NULL,
    answered_at_ms BIGINT,
    PRIMARY KEY (turn_id, kind, interaction_id)
  )`
  // Workspace write reservations (protocol "Workspace operations"; docs/dev-core.md "Files"): one row per
  // durable mutation id, reserved under the Session lock before any Runtime work; `status` moves
  // reserved → dispatched → committing → completed | rejected | failed | unknown.
  yield* sql`CREATE TABLE write_reservations (
    reservation_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (session_id),
    operation_id TEXT NOT NULL,
    status TEXT NOT NULL,
    digest TEXT,
    size_bytes BIGINT,
    created_at_ms BIGINT NOT NULL,
    settled_at_ms BIGINT
  )`
})

const ownerLeases = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // The owner lease of a device (docs/multi-node.md): which Core node holds its connection. `generation`
  // only grows (a claim adds one, even over an expired lease), so a write fenced on an older generation is
  // refused. A released lease keeps its row with `expires_at_ms` in the past.
  yield* sql`CREATE TABLE device_leases (
    device_id TEXT PRIMARY KEY,
    node_id TEXT NOT NULL,
    node_url TEXT NOT NULL,
    generation BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    claimed_at_ms BIGINT NOT NULL
  )`
})

const workspace = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // The Session's Environment as JSON (type none, or the self_hosted binding Core sends as local_environment).
  yield* sql`ALTER TABLE sessions ADD COLUMN environment_json TEXT`
  // Write reservations by Session: the Files API looks up the unsettled one under the Session lock.
  yield* sql`CREATE INDEX write_reservations_by_session ON write_reservations (session_id, status)`
})

const suspensions = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Suspension attempts (docs/operator-api.md "Suspension"; core/dev/Suspensions.ts): one row per suspend id,
  // written before the quiesce is sent and never replayed; `state` moves quiescing → suspended | quiesce_rejected
  // | quiesce_unknown, then resuming → resumed | resume_rejected | resume_unknown. `reason` is a finite code.
  yield* sql`CREATE TABLE suspension_attempts (
    suspend_id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL REFERENCES devices (device_id),
    environment_id TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX suspension_attempts_by_device ON suspension_attempts (device_id, created_at_ms)`
})

const listingIndexes = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Keyset paging of the operator listings (docs/operator-api.md): each page is an index range scan.
  yield* sql`CREATE INDEX devices_by_created ON devices (created_at_ms, device_id)`
  yield* sql`CREATE INDEX sessions_by_created ON sessions (created_at_ms, session_id)`
  yield* sql`CREATE INDEX turns_by_created ON turns (created_at_ms, turn_id)`
  yield* sql`CREATE INDEX turns_by_device ON turns (device_id, created_at_ms)`
  // Turn start reads two facts of its Session, each one index probe however many Turns it has: is one
  // unfinished, and was one ever dispatched.
  yield* sql`CREATE INDEX turns_by_session_status ON turns (session_id, status)`
  yield* sql`CREATE INDEX turns_by_session_dispatched ON turns (session_id, dispatched_at_ms)`
})

const nodeRequests = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Operations routed between Core nodes (docs/multi-node.md "Routing"; pg/NodeRouter.ts): one row per request,
  // `state` moves pending → claimed → done, or pending → withdrawn (the requester gave up before any claim). A
  // claimed request is never replayed. Bodies are operation inputs only, never a credential or a token. Used
  // with PostgreSQL only; the table exists unused on SQLite.
  yield* sql`CREATE TABLE node_requests (
    request_id TEXT PRIMARY KEY,
    target_node TEXT NOT NULL,
    requester_node TEXT NOT NULL,
    kind TEXT NOT NULL,
    turn_id TEXT,
    body_json TEXT NOT NULL,
    state TEXT NOT NULL,
    result_json TEXT,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    claimed_at_ms BIGINT,
    done_at_ms BIGINT
  )`
  yield* sql`CREATE INDEX node_requests_by_target ON node_requests (target_node, state, created_at_ms)`
  // The node whose runner dispatches the Turn (a database-level claim, taken `WHERE claimed_by IS NULL`):
  // two nodes can never both run one Turn. Null on SQLite (one node).
  yield* sql`ALTER TABLE turns ADD COLUMN claimed_by TEXT`
})

const turnOwners = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // The owner of a Turn's current delivery attempt (docs/multi-node.md "Fenced Turn writes"): the node that
  // began it and the generation of the device's owner lease it held. Every later write of that attempt is
  // fenced on this generation; a Turn whose owner generation is no longer the device's live lease has no
  // writer left and is reconciled by the lease sweeper (pg/LeaseSweeper.ts). Null on SQLite (one node).
  yield* sql`ALTER TABLE turns ADD COLUMN owner_node TEXT`
  yield* sql`ALTER TABLE turns ADD COLUMN owner_generation BIGINT`
  // Core nodes on one database and how long each is known alive (renewed by its sweeper): a queued Turn
  // accepted by a node whose row expired has no runner left.
  yield* sql`CREATE TABLE core_nodes (
    node_id TEXT PRIMARY KEY,
    node_url TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL
  )`
})

const sessionInitialization = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // A Session's environment initialization (docs/dev-core.md "Session initialization"; InitializationStore.ts):
  // `request_json` holds the files, skills, env and setup command until the initialization ends (then NULL);
  // `state` moves pending → running → completed | failed | unknown; `committing` is set before a step's commit
  // is sent, so a step interrupted by a restart is known unknown (committing) or failed (not).
  yield* sql`CREATE TABLE session_initializations (
    session_id TEXT PRIMARY KEY REFERENCES sessions (session_id),
    request_json TEXT,
    summary_json TEXT NOT NULL,
    state TEXT NOT NULL,
    current_step INTEGER,
    steps_json TEXT NOT NULL,
    committing BOOLEAN NOT NULL,
    detail TEXT,
    updated_at_ms BIGINT NOT NULL
  )`
})

const sessionMcpSecrets = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Bearer secrets of a Session's MCP servers, encrypted at rest (McpSecrets.ts): AES-256-GCM under the key file
  // in the data directory, base64 nonce / ciphertext / tag; the Session and the server's position are the
  // additional data. Never the secret in clear.
  yield* sql`CREATE TABLE session_mcp_secrets (
    session_id TEXT NOT NULL REFERENCES sessions (session_id),
    server_index INTEGER NOT NULL,
    nonce TEXT NOT NULL,
    ciphertext TEXT NOT NULL,
    tag TEXT NOT NULL,
    PRIMARY KEY (session_id, server_index)
  )`
})

const nodeStreams = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Byte streams between Core nodes (docs/multi-node.md "Workspace export from any node"; pg/NodeStreams.ts):
  // the consumer creates the stream row and deletes it (its chunks cascade) when it ends; each side renews its
  // beat while alive. The producer keeps at most a few unread chunks (base64 in TEXT: portable) ahead of the
  // consumer, which deletes each chunk as it takes it; the last row carries `final_json`. Used with PostgreSQL
  // only; the tables exist unused on SQLite.
  yield* sql`CREATE TABLE node_streams (
    stream_id TEXT PRIMARY KEY,
    consumer_node TEXT NOT NULL,
    producer_node TEXT NOT NULL,
    consumer_beat_ms BIGINT NOT NULL,
    producer_beat_ms BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE node_stream_chunks (
    stream_id TEXT NOT NULL REFERENCES node_streams (stream_id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    data TEXT,
    final_json TEXT,
    PRIMARY KEY (stream_id, seq)
  )`
})

const partialTurnIndexes = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Issue 18 (docs/store.md "Keys"): the Turn start's two probes need only the unfinished Turns of a Session and
  // whether one was ever dispatched, but migration 5's indexes kept an entry for every Turn, moved on each status
  // change and on dispatch (a page of that Session's region of the index written per change, per group commit).
  // Partial indexes hold only what the probes ask for: the unfinished Turns (a handful, inserted at create and
  // removed at settle) and the dispatched ones (written once, at dispatch). A query uses them only when it repeats
  // their predicate term as written (SQLite's rule): `status IN ('queued', 'running')`, `dispatched_at_ms IS NOT NULL`.
  yield* sql`DROP INDEX turns_by_session_status`
  yield* sql`DROP INDEX turns_by_session_dispatched`
  yield* sql`CREATE INDEX turns_unfinished_by_session ON turns (session_id) WHERE status IN ('queued', 'running')`
  yield* sql`CREATE INDEX turns_dispatched_by_session ON turns (session_id) WHERE dispatched_at_ms IS NOT NULL`
})

/** Every migration, in order. */
export const migrations = {
  "1_initial": initial,
  "2_owner_leases": ownerLeases,
  "3_workspace": workspace,
  "4_suspensions": suspensions,
  "5_listing_indexes": listingIndexes,
  "6_node_requests": nodeRequests,
  "7_turn_owners": turnOwners,
  "8_session_initialization": sessionInitialization,
  "9_session_mcp_secrets": sessionMcpSecrets,
  "10_node_streams": nodeStreams,
  "11_partial_turn_indexes": partialTurnIndexes
} as const

/** The table recording applied migration ids. */
export const MigrationsTable = "agentwire_migrations"

/**
 * Runs every pending migration. Success proves the schema is at the latest version; a failure leaves the
 * failed migration's transaction rolled back.
 */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: MigrationsTable
})
