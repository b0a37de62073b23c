"""Keys, sites and documents the REST tests share (a module of its own: `conftest` names collide across folders)."""

from __future__ import annotations

import uuid

RUN = uuid.uuid4().hex[:6]
SITE_A = f"t-api-a-{RUN}"
SITE_B = f"t-api-b-{RUN}"
KEY_A = f"key-a-{uuid.uuid4().hex}"
KEY_B = f"key-b-{uuid.uuid4().hex}"
KEY_AB = f"key-ab-{uuid.uuid4().hex}"
KEY_ALL = f"key-all-{uuid.uuid4().hex}"
ADMIN = f"admin-{uuid.uuid4().hex}"
API_KEYS = f"{KEY_A}={SITE_A},{KEY_B}={SITE_B},{KEY_AB}={SITE_A}|{SITE_B},{KEY_ALL}=*"

DOCS_A = [
    {"source": "a/fire.md", "title": "Fire safety",
     "text": "Buildings must have automatic fire alarm systems. Evacuation routes must be at least 1.2 metres wide."},
    {"source": "a/budget.md", "title": "Budget",
     "text": "The project budget covers contractors, materials and permits for the new school building."},
]
DOCS_B = [
    {"source": "b/secret.md", "title": "Secret plans of site B",
     "text": "Site B keeps its confidential roadmap here: the fire alarm vendor contract renews in March."},
]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
