"""Real answers of every dialect validated against `/openapi.json`.

Usage: python openapi_check.py ENDPOINT

Fetches the server's OpenAPI document, sends requests of each route (right
ones and refused ones), and validates each answer's body against the schema
the document gives for that route, method and status (JSON Schema 2020-12,
as OpenAPI 3.1). Prints one line per check; exits non-zero on the first
answer the document does not describe.
"""

import sys

import httpx
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

ENDPOINT = sys.argv[1]
client = httpx.Client(base_url=ENDPOINT, timeout=120)
document = client.get("/openapi.json").json()
registry = Registry().with_resource("urn:progscore-openapi", DRAFT202012.create_resource(document))


def pointer(*parts):
    return "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def check(route, method, reply):
    status = str(reply.status_code)
    responses = document["paths"][route][method]["responses"]
    what = f"{method.upper()} {route} -> {status}"
    if status not in responses:
        print(f"FAIL {what}: status not in the document ({reply.text[:300]})", flush=True)
        sys.exit(1)
    content = responses[status].get("content", {})
    if "application/json" in content:
        ref = "urn:progscore-openapi#/" + pointer("paths", route, method, "responses", status,
                                                   "content", "application/json", "schema")
        validator = Draft202012Validator({"$ref": ref}, registry=registry)
        errors = sorted(validator.iter_errors(reply.json()), key=lambda e: list(e.path))
        if errors:
            print(f"FAIL {what}: {errors[0].message} at {list(errors[0].path)}", flush=True)
            sys.exit(1)
    print(f"ok   {what}", flush=True)
    return reply


def expectation(stdout):
    return {"conditions": [{"program_behaves": {"profile": "python", "cases": [
        {"invocation": {"args": []}, "expected": {"stdout": {"equals": stdout}}}]}}]}


check("/v1/profiles", "get", client.get("/v1/profiles"))
scored = check("/v1/score", "post", client.post("/v1/score", json={
    "id": "a", "program": "print(2 + 2)", "expectation": expectation("4")}))
check("/v1/score", "post", client.post("/v1/score", json={"program": 5}))
ran = check("/v1/run", "post", client.post("/v1/run", json={
    "program": "import sys; print(sys.stdin.read())", "profile": "python",
    "invocations": [{"args": ["x"], "stdin": "hi"}]})).json()
check("/v1/run", "post", client.post("/v1/run", json={"program": "x", "profile": "cobol"}))
check("/v1/run", "post", client.post("/v1/run", json={
    "program": "print(1)", "profile": "python", "limits": {"timeout": "3s", "memory": "128MiB"}}))
check("/v1/run", "post", client.post("/v1/run", json={
    "program": "print(1)", "profile": "python", "limits": {"timeout": "2h"}}))
check("/v1/observations/{id}", "get", client.get(f"/v1/observations/{ran['observation_id']}"))
check("/v1/observations/{id}", "get", client.get("/v1/observations/obs-none"))
check("/v1/replay", "post", client.post("/v1/replay", json={
    "observation_id": scored.json()["observation_ids"][0], "expectation": expectation("5")}))
check("/run_code", "post", client.post("/run_code", json={"code": "print(1)", "language": "python"}))
check("/run_code", "post", client.post("/run_code", json={
    "code": "int main() { return 0 }", "language": "cpp"}))
check("/run_code", "post", client.post("/run_code", json={"code": "x", "language": "cobol"}))
check("/run_code", "post", client.post("/run_code", json={
    "code": "print(1)", "language": "python", "run_timeout": 3, "memory_limit_MB": 128}))
check("/run_code", "post", client.post("/run_code", json={
    "code": "print(1)", "language": "python", "run_timeout": -3}))
check("/v1/ping", "get", client.get("/v1/ping"))
token = check("/submissions", "post", client.post("/submissions", json={
    "source_code": "print(input())", "language_id": 71, "stdin": "z"})).json()["token"]
check("/submissions", "post", client.post("/submissions", params={"wait": "true", "fields": "*"},
                                          json={"source_code": "print(1)", "language_id": 71}))
check("/submissions", "post", client.post("/submissions", json={"source_code": "x", "language_id": 1}))
check("/submissions", "post", client.post("/submissions", params={"wait": "true"}, json={
    "source_code": "print(1)", "language_id": 71, "cpu_time_limit": 1, "wall_time_limit": 3,
    "memory_limit": 131072, "max_processes_and_or_threads": 16}))
check("/submissions", "post", client.post("/submissions", json={
    "source_code": "print(1)", "language_id": 71, "memory_limit": 1e12}))
check("/submissions/{token}", "get", client.get(f"/submissions/{token}", params={"fields": "*"}))
check("/submissions/batch", "post", client.post("/submissions/batch", json={"submissions": [
    {"source_code": "print(1)", "language_id": 71}, {"source_code": "x", "language_id": 1}]}))
check("/submissions/batch", "get", client.get("/submissions/batch",
                                              params={"tokens": f"{token},nope"}))
for route in ["/languages", "/statuses", "/about", "/config_info", "/api/v2/runtimes"]:
    check(route, "get", client.get(route))
check("/languages/{id}", "get", client.get("/languages/71"))
check("/api/v2/execute", "post", client.post("/api/v2/execute", json={
    "language": "cpp", "version": "*", "files": [{"content": "int main(){return 3;}"}]}))
check("/api/v2/execute", "post", client.post("/api/v2/execute", json={
    "language": "python", "files": [{"content": "a"}, {"content": "b"}]}))
check("/api/v2/execute", "post", client.post("/api/v2/execute", json={
    "language": "cpp", "files": [{"content": "int main(){return 0;}"}], "run_timeout": 3000,
    "compile_timeout": 20000, "run_memory_limit": 134217728, "compile_memory_limit": -1}))
check("/api/v2/execute", "post", client.post("/api/v2/execute", json={
    "language": "python", "files": [{"content": "print(1)"}], "run_timeout": -5}))
print("all clients agree", flush=True)
