"""Streamlit workbench entry point: the index status until the full app lands."""

from __future__ import annotations

import streamlit as st

from rag_core import RagError, open_workbench

st.set_page_config(page_title="RAG workbench", page_icon=":mag:", layout="wide")


@st.cache_resource
def workbench():
    return open_workbench()


st.title("RAG workbench")
try:
    info = workbench().status()
except RagError as exc:
    st.error(f"{exc.message} ({exc.code})")
    st.stop()

cols = st.columns(4)
cols[0].metric("Documents", info["documents"])
cols[1].metric("Chunks", info["chunks"])
cols[2].metric("Sources", info["sources"])
cols[3].metric("Database", f"{info['database_bytes'] / 1e6:.1f} MB")
st.caption(f"Embedder: {info['embedder'] or info['configured_embedder']} "
           f"({info['dimension'] or '?'} dimensions) · database: {info['database']}")
if info["embedder_mismatch"]:
    st.error(info["embedder_mismatch"])
if info["documents"] == 0:
    st.info("Nothing indexed yet. Run `rag ingest PATH` (for example `rag ingest README.md docs/`).")
else:
    st.subheader("Documents by type")
    st.bar_chart(info["by_type"])
    st.subheader("Latest documents")
    st.dataframe(workbench().documents(limit=50), hide_index=True, use_container_width=True)
