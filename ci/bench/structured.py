"""Structured output on minirun-serve (issue 49 item 1's targets), through the real `openai` client.

Twenty JSON Schemas, each with required fields, a nested object, an array and an enum. Every schema
is asked twice with the same prompt (which shows the schema), the same seed and temperature 0.8,
round-robin: once with `response_format` json_schema (strict), once without. An answer passes when
it parses (a Markdown code fence around it is forgiven) and `jsonschema` validates it.

The cost of the constraint on decode speed is measured apart, on answers of equal length (a long
unconstrained answer decodes slower for its length alone): for each schema the constrained answer
is asked again, and an unconstrained one with `max_tokens` set to its length (an unconstrained answer may
stop earlier at its end-of-sequence token; the table gives the median lengths), round-robin. Speed is each answer's own `timings`
(`predicted_per_second`: decode steps over decode seconds); the table gives medians.

Usage: SERVE_URL=http://127.0.0.1:PORT SERVE_MODEL=ID OUT=table.md python structured.py
"""
import json
import os
import re
import statistics

import jsonschema
import openai

URL = os.environ["SERVE_URL"]
MODEL = os.environ["SERVE_MODEL"]
OUT = os.environ["OUT"]
MAX_TOKENS = int(os.environ.get("MAX_TOKENS", "768"))


def s(n=16):
    return {"type": "string", "maxLength": n}


def enum(*v):
    return {"type": "string", "enum": list(v)}


def obj(props, required=None):
    return {"type": "object", "properties": props,
            "required": list(props) if required is None else required,
            "additionalProperties": False}


def arr(items, n=3):
    return {"type": "array", "items": items, "maxItems": n}


INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}

SCHEMAS = {
    "city": obj({"name": s(), "country": s(), "size": enum("town", "city", "megacity"),
                 "landmarks": arr(s(20), 2), "location": obj({"lat": NUM, "lon": NUM})}),
    "book": obj({"title": s(30), "genre": enum("fiction", "history", "science"),
                 "authors": arr(obj({"name": s(), "born": INT}), 2), "pages": INT}),
    "recipe": obj({"dish": s(), "difficulty": enum("easy", "medium", "hard"),
                   "ingredients": arr(obj({"item": s(), "grams": INT}), 3),
                   "time": obj({"prep": INT, "cook": INT})}),
    "person": obj({"name": s(), "age": INT, "role": enum("student", "teacher", "engineer"),
                   "skills": arr(s(12), 3), "address": obj({"street": s(20), "zip": s(8)})}),
    "weather": obj({"place": s(), "sky": enum("clear", "cloudy", "rain", "snow"),
                    "hours": arr(obj({"hour": INT, "celsius": NUM}), 3), "wind": obj({"kmh": NUM, "gusts": BOOL})}),
    "movie": obj({"title": s(24), "rating": enum("G", "PG", "R"), "cast": arr(s(), 3),
                  "release": obj({"year": INT, "month": INT})}),
    "order": obj({"id": INT, "status": enum("new", "paid", "shipped"),
                  "lines": arr(obj({"sku": s(10), "qty": INT}), 3), "customer": obj({"name": s(), "vip": BOOL})}),
    "planet": obj({"name": s(), "type": enum("rocky", "gas", "ice"), "moons": arr(s(), 3),
                   "orbit": obj({"days": NUM, "au": NUM})}),
    "bug": obj({"title": s(30), "severity": enum("low", "high", "critical"), "labels": arr(s(10), 3),
                "reporter": obj({"user": s(), "admin": BOOL})}),
    "song": obj({"title": s(24), "mood": enum("happy", "sad", "calm"), "instruments": arr(s(12), 3),
                 "length": obj({"minutes": INT, "seconds": INT})}),
    "flight": obj({"number": s(8), "class": enum("economy", "business", "first"),
                   "stops": arr(s(4), 2), "route": obj({"from": s(4), "to": s(4)})}),
    "animal": obj({"species": s(), "diet": enum("herbivore", "carnivore", "omnivore"),
                   "habitats": arr(s(), 2), "size": obj({"kg": NUM, "cm": NUM})}),
    "team": obj({"name": s(), "sport": enum("football", "tennis", "chess"),
                 "players": arr(obj({"name": s(), "number": INT}), 3), "coach": obj({"name": s(), "years": INT})}),
    "course": obj({"code": s(8), "level": enum("intro", "advanced"), "topics": arr(s(), 3),
                   "schedule": obj({"day": enum("mon", "wed", "fri"), "hour": INT})}),
    "car": obj({"make": s(), "fuel": enum("petrol", "diesel", "electric"), "features": arr(s(), 3),
                "engine": obj({"kw": INT, "turbo": BOOL})}),
    "event": obj({"name": s(24), "kind": enum("concert", "talk", "match"), "speakers": arr(s(), 2),
                  "venue": obj({"city": s(), "seats": INT})}),
    "invoice": obj({"number": INT, "currency": enum("EUR", "USD", "GBP"),
                    "items": arr(obj({"what": s(), "price": NUM}), 3), "paid": obj({"done": BOOL, "days": INT})}),
    "server": obj({"host": s(20), "os": enum("linux", "bsd", "windows"), "ports": arr(INT, 3),
                   "load": obj({"cpu": NUM, "memory": NUM})}),
    "plant": obj({"name": s(), "light": enum("sun", "shade", "partial"), "colors": arr(s(10), 2),
                  "care": obj({"water_days": INT, "indoor": BOOL})}),
    "game": obj({"title": s(24), "genre": enum("puzzle", "strategy", "racing"), "platforms": arr(s(10), 3),
                 "score": obj({"critics": INT, "users": NUM})}),
}
assert len(SCHEMAS) == 20


def prompt(name, schema):
    return [{"role": "user", "content":
             f"Describe a {name} as one JSON object that follows this JSON Schema, and nothing else:\n"
             + json.dumps(schema)}]


def ask(client, name, schema, constrained, seed, max_tokens=MAX_TOKENS):
    kw = dict(model=MODEL, messages=prompt(name, schema), max_tokens=max_tokens, temperature=0.8, seed=seed)
    if constrained:
        kw["response_format"] = {"type": "json_schema",
                                 "json_schema": {"name": name, "strict": True, "schema": schema}}
    r = client.chat.completions.create(**kw)
    text = r.choices[0].message.content
    t = r.model_extra["timings"]
    return text, r.choices[0].finish_reason, t["predicted_n"], t["predicted_per_second"]


def valid(text, schema):
    m = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", text, re.S)
    try:
        jsonschema.validate(json.loads(m.group(1) if m else text), schema)
        return True
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False


def main():
    client = openai.OpenAI(api_key="unused", base_url=URL + "/v1", max_retries=0, timeout=3600)
    rows, speed = [], {True: [], False: []}
    for i, (name, schema) in enumerate(SCHEMAS.items()):
        row = {"name": name}
        # round-robin: the order of the two arms alternates schema by schema
        for constrained in ((True, False) if i % 2 == 0 else (False, True)):
            text, finish, n, per_s = ask(client, name, schema, constrained, seed=1000 + i)
            row[constrained] = (valid(text, schema), finish, n)
            print(name, "constrained" if constrained else "free", finish, n, repr(text[:80]), flush=True)
        rows.append(row)
    for i, r in enumerate(rows):
        name, schema, n = r["name"], SCHEMAS[r["name"]], r[True][2]
        for constrained in ((True, False) if i % 2 == 0 else (False, True)):
            _, _, got, per_s = ask(client, name, schema, constrained, seed=1000 + i, max_tokens=n)
            if got > 1:
                speed[constrained].append((per_s, got))
    pairs = len(speed[True])
    ok = {c: sum(r[c][0] for r in rows) for c in (True, False)}
    length = {c: sum(r[c][1] == "length" for r in rows) for c in (True, False)}
    med = {c: statistics.median(v for v, _ in speed[c]) for c in (True, False)}
    toks = {c: statistics.median(n for _, n in speed[c]) for c in (True, False)}
    with open(OUT, "w") as f:
        f.write("| schema | constrained: valid | finish | tokens | unconstrained: valid | finish | tokens |\n")
        f.write("|---|---|---|---:|---|---|---:|\n")
        for r in rows:
            a, b = r[True], r[False]
            f.write(f"| {r['name']} | {'yes' if a[0] else 'NO'} | {a[1]} | {a[2]} | "
                    f"{'yes' if b[0] else 'no'} | {b[1]} | {b[2]} |\n")
        f.write(f"\n| | constrained | unconstrained |\n|---|---:|---:|\n")
        f.write(f"| valid (of 20) | {ok[True]} | {ok[False]} |\n")
        f.write(f"| stopped on length | {length[True]} | {length[False]} |\n")
        f.write(f"| median decode tokens/s, equal-length answers ({pairs} each; median length) | "
                f"{med[True]:.2f} ({toks[True]:.0f} tokens) | {med[False]:.2f} ({toks[False]:.0f} tokens) |\n")
        f.write(f"| constrained decode speed relative to unconstrained | {med[True] / med[False]:.3f} | |\n")
    print(open(OUT).read())


if __name__ == "__main__":
    main()
