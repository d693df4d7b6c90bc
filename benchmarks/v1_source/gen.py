"""Regenerate benchmarks/v1.json from the per-type task modules beside this file.

References (expected outputs, test suites, answers) are worked out here in plain
Python, independently of the reference tools. Run: python benchmarks/v1_source/gen.py
(key order inside some expected objects follows string hashing; the values are
equal, and scoring compares canonical JSON).
"""
import json
from pathlib import Path
from common import make_task
import data_tasks

OUT = Path(__file__).resolve().parent.parent / "v1.json"


def build():
    tasks = []
    i = 0
    for t in data_tasks.tasks():
        ref = {"expected_output": t["expected"], "output_schema": t["schema"]}
        tasks.append(make_task(i, t["id"], "data_transform", t["desc"], t["steps"], ref))
        i += 1
    for mod_name, ttype in (("code_tasks", "code"), ("rag_tasks", "rag"), ("agent_tasks", "agent")):
        try:
            mod = __import__(mod_name)
        except ImportError:
            continue
        for t in mod.tasks():
            tasks.append(make_task(i, t["id"], ttype, t["desc"], t["steps"], t["reference"],
                                   extra_latency=t.get("extra_latency", 0.0), disallow=t.get("disallow"),
                                   routing=t.get("routing"), quality_criteria=t.get("quality_criteria")))
            i += 1
    return {"version": "v1", "tasks": tasks}


if __name__ == "__main__":
    doc = build()
    OUT.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    print(len(doc["tasks"]), "tasks ->", OUT)
