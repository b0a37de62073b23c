"""Search fixtures: one small trilingual site ingested once per session (real embedder, real DB)."""

from __future__ import annotations

import uuid

import pytest

CORPUS = [
    {"source": "en/fire.md", "title": "Fire safety requirements",
     "text": "Buildings must have automatic fire alarm systems. Evacuation routes must be at least 1.2 metres "
             "wide, and fire doors close automatically when the alarm sounds."},
    {"source": "en/budget.md", "title": "Project budget",
     "text": "The project budget covers contractors, materials and permits for the new school building."},
    {"source": "en/hybrid.md", "title": "Hybrid retrieval",
     "text": "Reciprocal rank fusion combines BM25 keyword ranking with vector similarity from an embedding model."},
    {"source": "ru/fire.md", "title": "Пожарная безопасность",
     "text": "Требования к пожарной безопасности зданий. Здания должны быть оснащены автоматическими системами "
             "пожарной сигнализации и оповещения о пожаре."},
    {"source": "ru/roads.md", "title": "Автомобильные дороги",
     "text": "Проектирование автомобильных дорог с низкой интенсивностью движения: ширина проезжей части и обочин."},
    {"source": "ru/water.md", "title": "Водоснабжение",
     "text": "Наружные сети и сооружения водоснабжения проектируют с учётом расчётного расхода воды."},
    {"source": "ja/tsuyu.md", "title": "梅雨",
     "text": "梅雨は、北海道と小笠原諸島を除く日本、朝鮮半島南部、中国の華南や華中の沿海部、および台湾など、"
             "東アジアの広範囲においてみられる特有の気象現象で、5月から7月にかけて来る曇りや雨の多い期間のこと。"},
    {"source": "ja/tokyo.md", "title": "東京", "text": "東京都は日本の首都であり、人口は約1400万人である。"},
    {"source": "ja/fuji.md", "title": "富士山",
     "text": "富士山は静岡県と山梨県にまたがる活火山で、標高3776メートルは日本最高峰である。"},
]


@pytest.fixture(scope="session")
def corpus_site(wb) -> str:
    """A site holding CORPUS (nine documents in English, Russian and Japanese)."""
    site_id = f"t-search-{uuid.uuid4().hex[:6]}"
    report = wb.ingest_texts(CORPUS, site_id=site_id)
    assert report.to_dict()["failed"] == 0
    yield site_id
    with wb.db.connection() as conn:
        conn.execute("DELETE FROM documents WHERE site_id = %s", (site_id,))
