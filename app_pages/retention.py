"""Retention: the chat-history policy, message ages, a dry run, a confirmed purge and the audit log."""

from __future__ import annotations

import datetime as dt

import plotly.express as px
import streamlit as st

import app_ui as ui

wb = ui.wb()
st.title("Retention")
state = ui.call(ui.retention_status, default=None)
if state is None:
    st.stop()

policy = state["policy"]
cols = st.columns(5)
cols[0].metric("Keep messages for", f"{policy['retention_days']} days")
cols[1].metric("Daily purge at", policy["purge_time"] or "—")
cols[2].metric("Messages", f"{state['messages']:,}")
cols[3].metric("Sessions", f"{state['sessions']:,}")
cols[4].metric("Older than the policy", f"{state['due_for_purge']:,}")
oldest = state["oldest_message"]
st.caption(f"Oldest message: {oldest:%Y-%m-%d %H:%M} UTC. " if oldest else "No chat messages stored. ")
st.caption("The policy comes from `RAG_RETENTION_DAYS` and `RAG_RETENTION_TIME`; `rag retention purge` does the "
           "same from the command line.")

st.subheader("Message ages")
if state["messages"]:
    bars = state["age_histogram"]
    fig = px.bar(x=[b["label"] for b in bars], y=[b["messages"] for b in bars],
                 color=["beyond the policy" if b["beyond_policy"] else "kept" for b in bars],
                 color_discrete_map={"kept": "#4c78a8", "beyond the policy": "#e45756"},
                 labels={"x": "age", "y": "messages", "color": ""}, height=280)
    fig.update_xaxes(type="category")
    ui.count_axis(fig, [b["messages"] for b in bars])
    fig.update_layout(margin=dict(l=10, r=10, t=10, b=10), legend=dict(orientation="h", y=1.1))
    st.plotly_chart(fig, width="stretch")
else:
    st.info("No chat history yet: conversations on the Chat page (and messages stored by workflows) show up here.")

st.subheader("Purge")
days = st.columns([1, 3])[0].number_input("Delete messages older than (days)", min_value=1, max_value=3650,
                       value=int(policy["retention_days"]), step=1, key="purge_days")
older_than = dt.timedelta(days=int(days))
if st.button("Dry run: count what would be deleted", key="purge_dry", icon=":material/preview:"):
    result = ui.call(wb.purge_chat_history, older_than, dry_run=True, triggered_by="app")
    if result is not None:
        ui.invalidate()
        st.session_state.purge_preview = result
preview = st.session_state.get("purge_preview")
if preview:
    st.info(f"A purge of messages older than {preview['older_than_days']:g} days (before "
            f"{preview['cutoff']:%Y-%m-%d %H:%M} UTC) would delete **{preview['messages_deleted']:,} messages** and "
            f"**{preview['sessions_deleted']:,} sessions**. Nothing was deleted.", icon=":material/preview:")
confirm = st.checkbox(f"I understand that messages older than {int(days)} days are deleted for good",
                      key="purge_confirm")
if st.button("Purge now", type="primary", disabled=not confirm, key="purge_go", icon=":material/delete_forever:"):
    result = ui.call(wb.purge_chat_history, older_than, dry_run=False, triggered_by="app")
    if result is not None:
        ui.invalidate()
        st.session_state.pop("purge_preview", None)
        st.success(f"Deleted {result['messages_deleted']:,} messages and {result['sessions_deleted']:,} sessions "
                   f"in {result['duration_ms']:.0f} ms.")
        state = ui.call(ui.retention_status, default=state)

st.subheader("Audit log")
audits = state["last_purges"]
if audits:
    st.dataframe([{"ran at": a["ran_at"], "dry run": a["dry_run"], "older than (days)": a["older_than_days"],
                   "messages": a["messages_deleted"], "sessions": a["sessions_deleted"],
                   "oldest remaining": a["oldest_remaining"], "ms": round(a["duration_ms"] or 0, 1),
                   "by": a["triggered_by"]} for a in audits], hide_index=True, width="stretch")
else:
    st.caption("No purge has run yet.")
