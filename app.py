"""Streamlit workbench: Chat, Search, Ingestion, Retention and Analytics over one cached Workbench."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

# The pages import the shared helpers beside this file, also when a test runner starts the script.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import app_ui  # noqa: E402

# The favicon is a file beside the app, served by the app itself: a material-icon favicon would be fetched
# from an outside font host, and the workbench makes no request beyond its own server.
st.set_page_config(page_title="RAG workbench", page_icon=str(Path(__file__).resolve().parent / "app_icon.png"),
                   layout="wide")

# The folder is app_pages/, not pages/: Streamlit runs a pages/ folder as old-style standalone pages
# (no site picker, no wide layout) when a fresh server's first request is a page URL such as /search.
PAGES = [
    st.Page("app_pages/chat.py", title="Chat", icon=":material/chat:", default=True),
    st.Page("app_pages/search.py", title="Search", icon=":material/search:"),
    st.Page("app_pages/ingestion.py", title="Ingestion", icon=":material/upload_file:"),
    st.Page("app_pages/retention.py", title="Retention", icon=":material/auto_delete:"),
    st.Page("app_pages/analytics.py", title="Analytics", icon=":material/monitoring:"),
]
page = st.navigation(PAGES)

app_ui.wb()  # opens the store once (or explains why it cannot) before any page draws
app_ui.site_selector()
info = app_ui.call(app_ui.status, app_ui.current_site())
app_ui.show_flash()
if info:
    st.sidebar.caption(f"{app_ui.plural(info['documents'], 'document')} · "
                       f"{app_ui.plural(info['chunks'], 'chunk')} · {info['embedder'] or info['configured_embedder']}")
    if info["embedder_mismatch"]:
        st.sidebar.error(info["embedder_mismatch"])
    if info["embedder_notice"]:
        st.sidebar.warning(info["embedder_notice"])
page.run()
