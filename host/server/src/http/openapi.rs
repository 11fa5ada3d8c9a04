//! `GET /openapi.json`: the OpenAPI 3.1 document of every route, its
//! requests and its answers. Written here beside the routes (not generated)
//! and kept true by the serve tests, which validate real answers of every
//! dialect against it.

use serde_json::{Value, json};

/// The document (its version is progscore's).
pub fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "progscore serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Runs submitted programs verbatim in a hardened sandbox and says what they did, with evidence: progscore's own API under /v1, and SandboxFusion's, Judge0 CE's and Piston v2's APIs as drop-ins. An infrastructure fault or an unproven timeout is never reported as the program's failure."
        },
        "paths": paths(),
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "judge0Token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}
            }
        },
        "security": [{}, {"bearer": []}, {"judge0Token": []}]
    })
}

fn schema(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// A JSON answer of `status` with the body `schema`.
fn answer(description: &str, body: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": body}}})
}

fn refusals() -> Value {
    json!({
        "400": answer("Malformed or mistyped: the field is named", schema("Error")),
        "403": answer("A web page's request (Origin not in [serve] origins)", schema("Error")),
        "408": answer("The body did not arrive within [serve] body_timeout", schema("Error")),
        "413": answer("Past a [serve] maximum: the field is named", schema("Error")),
        "415": answer("The body was not sent as JSON (Content-Type)", schema("Error")),
        "421": answer("The Host named is not this server ([serve] hosts)", schema("Error")),
        "429": answer("The profile's queue is full or the wait too long (Retry-After)", schema("Error")),
        "503": answer("Draining, the sandbox refused the run, or the bodies held fill [serve] max_bodies_in_memory (Retry-After)", schema("Error"))
    })
}

fn with_refusals(ok: (&str, Value)) -> Value {
    let mut responses = refusals();
    responses[ok.0] = ok.1;
    responses
}

fn json_body(body: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": body}}})
}

fn ndjson_body(description: &str) -> Value {
    json!({"required": true, "description": description,
           "content": {"application/x-ndjson": {"schema": {"type": "string"}}}})
}

fn paths() -> Value {
    let text = |description: &str| json!({"200": {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}});
    json!({
        "/healthz": {"get": {"summary": "Liveness", "security": [{}], "responses": text("The process answers")}},
        "/readyz": {"get": {"summary": "Readiness: preflight passed, not draining", "security": [{}],
            "responses": {"200": {"description": "Ready"}, "503": {"description": "Draining"}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": text("The text exposition")}},
        "/openapi.json": {"get": {"summary": "This document",
            "responses": {"200": answer("OpenAPI 3.1", json!({"type": "object"}))}}},
        "/v1/profiles": {"get": {"summary": "The served profiles",
            "responses": {"200": answer("One entry per served profile", json!({"type": "array", "items": schema("ServedProfile")}))}}},
        "/v1/score": {"post": {"summary": "Score one batch line",
            "parameters": [fresh()],
            "requestBody": json_body(schema("BatchLine")),
            "responses": with_refusals(("200", answer("Its result line", schema("ResultLine"))))}},
        "/v1/batches": {"post": {"summary": "Score batch lines, results streamed as each completes",
            "parameters": [fresh()],
            "requestBody": ndjson_body("Batch lines, one JSON object per line"),
            "responses": with_refusals(("200", json!({"description": "NDJSON: a line per bad line, a result line per item as it completes, then {\"summary\": ...}",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}}})))}},
        "/v1/run": {"post": {"summary": "Run a program (no scoring)",
            "parameters": [fresh()],
            "requestBody": json_body(schema("RunRequest")),
            "responses": with_refusals(("200", answer("The run, stored as evidence", schema("RunAnswer"))))}},
        "/v1/observations/{id}": {"get": {"summary": "A stored observation",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": answer("The observation", schema("Observation")),
                          "404": answer("Not stored", schema("Error"))}}},
        "/v1/replay": {"post": {"summary": "Score a stored observation against an expectation; nothing runs",
            "requestBody": json_body(json!({"type": "object", "required": ["observation_id", "expectation"],
                "properties": {"observation_id": {"type": "string"}, "expectation": {"type": "object"}, "id": {"type": "string"}}})),
            "responses": with_refusals(("200", answer("Its result line", schema("ResultLine"))))}},
        "/v1/rescore": {"post": {"summary": "Score batch lines from stored evidence only",
            "requestBody": ndjson_body("Batch lines"),
            "responses": with_refusals(("200", json!({"description": "NDJSON result lines with changed and previous, then the summary",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}}})))}},
        "/run_code": {"post": {"summary": "SandboxFusion: run code",
            "requestBody": json_body(schema("RunCodeRequest")),
            "responses": {"200": answer("SandboxFusion's RunCodeResponse; X-Progscore-Observation names the evidence", schema("RunCodeResponse")),
                          "400": answer("Malformed: the field is named", schema("Error")),
                          "504": answer("No turn in the profile's queue (verl retries it)", schema("Error"))}}},
        "/v1/ping": {"get": {"summary": "SandboxFusion: ping", "responses": {"200": answer("\"pong\"", json!({"const": "pong"}))}}},
        "/submissions": {"post": {"summary": "Judge0: create a submission",
            "parameters": judge0_query(true),
            "requestBody": json_body(schema("Judge0SubmissionRequest")),
            "responses": {"201": answer("A token, or with wait=true the finished submission",
                                        json!({"anyOf": [schema("Judge0Token"), schema("Judge0Submission")]})),
                          "422": answer("The field at fault, Judge0's shape", schema("Judge0FieldErrors"))}}},
        "/submissions/{token}": {"get": {"summary": "Judge0: a submission",
            "parameters": [{"name": "token", "in": "path", "required": true, "schema": {"type": "string"}}, base64(), fields()],
            "responses": {"200": answer("The submission's asked fields", schema("Judge0Submission")),
                          "404": answer("No such token", json!({"type": "object"}))}}},
        "/submissions/batch": {
            "post": {"summary": "Judge0: create submissions",
                "parameters": judge0_query(true),
                "requestBody": json_body(json!({"type": "object", "required": ["submissions"],
                    "properties": {"submissions": {"type": "array", "items": schema("Judge0SubmissionRequest")}}})),
                "responses": {"201": answer("Per submission: a token, its field errors, or (wait=true) the finished submission",
                    json!({"type": "array", "items": {"anyOf": [schema("Judge0Token"), schema("Judge0FieldErrors"), schema("Judge0Submission")]}}))}},
            "get": {"summary": "Judge0: submissions by token",
                "parameters": [{"name": "tokens", "in": "query", "required": true, "schema": {"type": "string"}}, base64(), fields()],
                "responses": {"200": answer("null for a token not stored", json!({"type": "object", "required": ["submissions"],
                    "properties": {"submissions": {"type": "array", "items": {"oneOf": [schema("Judge0Submission"), {"type": "null"}]}}}}))}}},
        "/languages": {"get": {"summary": "Judge0: served languages",
            "responses": {"200": answer("Judge0 CE 1.13.1 ids", json!({"type": "array", "items": {"type": "object", "required": ["id", "name"],
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}}))}}},
        "/languages/{id}": {"get": {"summary": "Judge0: a served language",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
            "responses": {"200": answer("The language", json!({"type": "object", "required": ["id", "name"]})),
                          "404": answer("Not served", json!({"type": "object"}))}}},
        "/statuses": {"get": {"summary": "Judge0: statuses",
            "responses": {"200": answer("Every status", json!({"type": "array", "items": schema("Judge0Status")}))}}},
        "/about": {"get": {"summary": "Judge0: about",
            "responses": {"200": answer("The Judge0 version whose ids are served", json!({"type": "object", "required": ["version"]}))}}},
        "/config_info": {"get": {"summary": "Judge0: configuration",
            "responses": {"200": answer("Judge0's configuration keys as progscore applies them", json!({"type": "object"}))}}},
        "/api/v2/execute": {"post": {"summary": "Piston: execute",
            "requestBody": json_body(schema("PistonExecuteRequest")),
            "responses": {"200": answer("The stages; X-Progscore-Observation names the evidence", schema("PistonExecuteResponse")),
                          "400": answer("Piston's shape, the field first in the message", schema("PistonError")),
                          "429": answer("No turn in the profile's queue (Retry-After)", schema("PistonError"))}}},
        "/api/v2/runtimes": {"get": {"summary": "Piston: runtimes",
            "responses": {"200": answer("One per served language name", json!({"type": "array", "items": {"type": "object",
                "required": ["language", "version", "aliases"],
                "properties": {"language": {"type": "string"}, "version": {"type": "string"},
                               "aliases": {"type": "array", "items": {"type": "string"}}, "runtime": {"type": "string"}}}}))}}}
    })
}

fn fresh() -> Value {
    json!({"name": "fresh", "in": "query", "schema": {"type": "boolean"},
           "description": "Run again even where evidence is stored"})
}

fn base64() -> Value {
    json!({"name": "base64_encoded", "in": "query", "schema": {"type": "boolean"}})
}

fn fields() -> Value {
    json!({"name": "fields", "in": "query", "schema": {"type": "string"},
           "description": "Comma-separated fields, or *"})
}

fn judge0_query(wait: bool) -> Value {
    let mut parameters = vec![base64(), fields()];
    if wait {
        parameters.push(json!({"name": "wait", "in": "query", "schema": {"type": "boolean"}}));
    }
    Value::Array(parameters)
}

fn schemas() -> Value {
    let string_or_null = json!({"type": ["string", "null"]});
    let integer_or_null = json!({"type": ["integer", "null"]});
    let number_or_null = json!({"type": ["number", "null"]});
    let stream = json!({"type": "object", "required": ["truncated", "total_bytes"],
        "properties": {"truncated": {"type": "boolean"}, "total_bytes": {"type": "integer"}}});
    // The requests' schemas apart: one json! of them all passes the
    // macro's recursion limit.
    let limits_schema = json!({"type": "object", "additionalProperties": false,
            "description": "The program's own limits over its profile's, in the config's units; within [serve] max_timeout, max_cpu_time, max_memory, max_pids (max_compile_timeout for a compile); output, tmp and build may only lower the profile's; cpus must be the profile's",
            "properties": {"timeout": {"type": "string", "examples": ["2500ms", "2s"]},
                "cpu_time": {"type": "string"}, "memory": {"type": "string", "examples": ["256MiB"]},
                "pids": {"type": "integer", "minimum": 1}, "cpus": {"type": "number"},
                "output": {"type": "string"}, "tmp": {"type": "string"}, "build": {"type": "string"}}});
    let run_code_request_schema = json!({"type": "object", "required": ["code", "language"],
            "properties": {"code": {"type": "string"}, "language": {"type": "string"}, "stdin": string_or_null,
                "compile_timeout": {"type": ["number", "null"], "description": "Seconds: the compile's wall-clock limit (ignored for a profile without a compile step)"},
                "run_timeout": {"type": ["number", "null"], "description": "Seconds: the run's wall-clock limit"},
                "memory_limit_MB": {"type": ["number", "null"], "description": "MiB: the run's memory limit; -1 the profile's"},
                "files": {"type": "object", "additionalProperties": {"type": ["string", "null"]}, "description": "relative path: base64; placed beside the program, read-only"}, "fetch_files": {"type": "array", "maxItems": 0}}});
    let judge0_request_schema = json!({"type": "object", "required": ["source_code", "language_id"],
            "properties": {"source_code": {"type": "string"}, "language_id": {"type": "integer"},
                "stdin": string_or_null, "expected_output": string_or_null, "command_line_arguments": string_or_null,
                "additional_files": {"type": ["string", "null"], "description": "A base64 zip: its files are placed beside the program, read-only"},
                "cpu_time_limit": {"type": ["number", "null"], "description": "Seconds of CPU time, all processes together"},
                "wall_time_limit": {"type": ["number", "null"], "description": "Seconds of wall clock"},
                "memory_limit": {"type": ["number", "null"], "description": "KB"},
                "max_processes_and_or_threads": integer_or_null,
                "cpu_extra_time": {"type": ["number", "null"], "description": "Checked and ignored"},
                "stack_limit": {"type": ["integer", "null"], "description": "Checked and ignored: the stack is bounded by the memory limit"},
                "max_file_size": {"type": ["integer", "null"], "description": "Checked and ignored: files go to a tmpfs bounded by the profile"},
                "enable_per_process_and_thread_time_limit": {"enum": [false, null]},
                "enable_per_process_and_thread_memory_limit": {"enum": [false, null]},
                "enable_network": {"enum": [false, null]}}});
    let piston_request_schema = json!({"type": "object", "required": ["language", "files"],
            "properties": {"language": {"type": "string"}, "version": {"type": "string"},
                "files": {"type": "array", "minItems": 1, "description": "files[0] is the program; the others are placed beside it by name", "items": {"type": "object", "required": ["content"],
                    "properties": {"name": {"type": "string"}, "content": {"type": "string"}, "encoding": {"enum": ["utf8", "base64"]}}}},
                "stdin": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}},
                "run_timeout": {"type": "number", "description": "ms: the run's wall-clock limit; -1 the profile's"},
                "compile_timeout": {"type": "number", "description": "ms: the compile's wall-clock limit; -1 the profile's (ignored without a compile step)"},
                "run_memory_limit": {"type": "number", "description": "bytes: the run's memory limit; -1 the profile's"},
                "compile_memory_limit": {"type": "number", "description": "bytes: the compile's memory limit; -1 the profile's (ignored without a compile step)"}}});
    let mut all = json!({
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message"],
            "properties": {"message": {"type": "string"}, "field": {"type": "string"}}}}},
        "BatchLine": {"type": "object", "required": ["program", "expectation"],
            "properties": {"id": {"type": "string"}, "program": {"type": "string"}, "expectation": {"type": "object"}}},
        "ResultLine": {"type": "object",
            "required": ["id", "status", "value", "rationale", "observation_ids", "cases", "evidence", "score_id"],
            "properties": {
                "id": string_or_null,
                "status": {"enum": ["complete", "undetermined"]},
                "value": {"type": ["boolean", "null"]},
                "rationale": {"type": "string"},
                "reason": {"type": "string"},
                "reason_kind": {"enum": ["sandbox_error", "not_run", "unconfirmed_timeout", "comparator_undecided", "no_evidence", "behaviour_unknown", "checker_undecided"]},
                "observation_ids": {"type": "array", "items": {"type": "string"}},
                "cases": {"type": "array", "items": schema("CaseReport")},
                "evidence": {"enum": ["ran", "joined", "stored", "replayed"]},
                "score": {"type": "number", "minimum": 0, "maximum": 1,
                    "description": "the item's score under its expectation's score policy, when decided"},
                "groups": {"type": "array", "items": {"type": "object",
                    "required": ["name", "points", "earned"], "properties": {
                        "name": {"type": "string"}, "points": {"type": "number"},
                        "earned": {"type": ["number", "null"]}}}},
                "score_id": {"type": "integer"},
                "changed": {"type": "boolean"},
                "previous": string_or_null}},
        "CaseReport": {"type": "object", "required": ["outcome", "matched", "duration_ms"],
            "properties": {"outcome": {"type": "string"}, "exit_code": {"type": "integer"},
                "matched": {"type": ["boolean", "null"]}, "duration_ms": {"type": "integer"},
                "cpu_ms": {"type": "integer"}, "peak_memory_bytes": {"type": "integer"}, "detail": {"type": "string"},
                "score": {"type": "number", "minimum": 0, "maximum": 1, "description": "the case's partial score, when a checker gave points"},
                "checker": {"type": "string", "description": "what the checker said of the output"}}},
        "Invocation": {"type": "object", "properties": {
            "args": {"type": "array", "items": {"type": "string"}}, "stdin": {}}},
        "RunRequest": {"type": "object", "required": ["program", "profile"],
            "properties": {"program": {"type": "string"}, "profile": {"type": "string"},
                "invocations": {"type": "array", "items": schema("Invocation")},
                "limits": schema("Limits"), "compile_limits": schema("Limits"),
                "files": {"type": "object", "description": "relative path: text (or {\"base64\": ...}); placed beside the program, read-only"}}},
        "InvocationEvent": {"type": "object", "required": ["outcome", "stdout", "stderr", "duration_ms"],
            "properties": {"outcome": {"enum": ["exited", "timed_out", "memory_limit", "sandbox_error", "not_run", "compile_error"]},
                "exit_code": {"type": "integer"}, "stdout": stream.clone(), "stderr": stream,
                "duration_ms": {"type": "integer"}, "usage": {"type": "object"}, "provenance": {"type": "object"}}},
        "ProgramRun": {"type": "object", "required": ["profile", "program_sha256", "events"],
            "properties": {"profile": {"type": "string"}, "program_sha256": {"type": "string"},
                "events": {"type": "array", "items": schema("InvocationEvent")},
                "sandbox_warnings": {"type": "array", "items": {"type": "string"}},
                "compile": schema("InvocationEvent")}},
        "RunAnswer": {"type": "object", "required": ["observation_id", "evidence", "run"],
            "properties": {"observation_id": {"type": "string"}, "evidence": {"enum": ["ran", "joined", "stored"]},
                "run": schema("ProgramRun")}},
        "Observation": {"type": "object",
            "required": ["id", "attempt_key", "profile", "program_sha256", "invocations", "run", "created_at"],
            "properties": {"id": {"type": "string"}, "attempt_key": {"type": "string"}, "profile": {"type": "string"},
                "program_sha256": {"type": "string"}, "invocations": {"type": "array", "items": schema("Invocation")},
                "run": schema("ProgramRun"), "created_at": {"type": "string"}}},
        "ServedProfile": {"type": "object", "required": ["name", "fingerprint", "profile", "queue"],
            "properties": {"name": {"type": "string"}, "fingerprint": {"type": "string"}, "profile": {"type": "object"},
                "queue": {"type": "object", "required": ["concurrency", "running", "waiting"]}}},
        "CommandRunResult": {"type": "object",
            "required": ["status", "execution_time", "cpu_time", "return_code", "stdout", "stderr"],
            "properties": {"status": {"enum": ["Finished", "Error", "TimeLimitExceeded"]},
                "execution_time": number_or_null, "cpu_time": number_or_null, "return_code": integer_or_null,
                "stdout": string_or_null, "stderr": string_or_null}},
        "RunCodeResponse": {"type": "object", "required": ["status", "message", "compile_result", "run_result", "files"],
            "properties": {"status": {"enum": ["Success", "Failed", "SandboxError"]}, "message": {"type": "string"},
                "compile_result": {"oneOf": [schema("CommandRunResult"), {"type": "null"}]},
                "run_result": {"oneOf": [schema("CommandRunResult"), {"type": "null"}]},
                "executor_pod_name": string_or_null, "files": {"type": "object"}}},
        "Judge0Token": {"type": "object", "required": ["token"], "additionalProperties": false,
            "properties": {"token": {"type": "string", "format": "uuid"}}},
        "Judge0FieldErrors": {"type": "object", "minProperties": 1,
            "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        "Judge0Status": {"type": "object", "required": ["id", "description"],
            "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 14}, "description": {"type": "string"}}},
        "Judge0Submission": {"type": "object", "minProperties": 1,
            "properties": {"token": {"type": "string"}, "status": schema("Judge0Status"),
                "status_id": {"type": "integer"}, "stdout": string_or_null, "stderr": string_or_null,
                "compile_output": string_or_null, "message": string_or_null, "exit_code": integer_or_null,
                "exit_signal": integer_or_null, "time": string_or_null, "wall_time": string_or_null,
                "memory": integer_or_null, "language_id": {"type": "integer"}, "source_code": string_or_null,
                "stdin": string_or_null, "expected_output": string_or_null, "created_at": {"type": "string"},
                "finished_at": string_or_null}},
        "PistonStage": {"type": "object", "required": ["stdout", "stderr", "output", "code", "signal", "status"],
            "properties": {"stdout": {"type": "string"}, "stderr": {"type": "string"}, "output": {"type": "string"},
                "code": integer_or_null, "signal": string_or_null,
                "status": {"enum": ["RE", "SG", "TO", "XX", null]}, "message": string_or_null,
                "cpu_time": integer_or_null, "wall_time": integer_or_null, "memory": integer_or_null}},
        "PistonExecuteResponse": {"type": "object", "required": ["language", "version"],
            "properties": {"language": {"type": "string"}, "version": {"type": "string"},
                "compile": schema("PistonStage"), "run": schema("PistonStage")}},
        "PistonError": {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}
    });
    all["Limits"] = limits_schema;
    all["RunCodeRequest"] = run_code_request_schema;
    all["Judge0SubmissionRequest"] = judge0_request_schema;
    all["PistonExecuteRequest"] = piston_request_schema;
    all
}
