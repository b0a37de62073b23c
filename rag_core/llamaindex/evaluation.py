"""Scoring our retriever with LlamaIndex's own evaluators beside other retrievers (notebook 05).

LlamaIndex's `RetrieverEvaluator` compares the ids of retrieved nodes with the expected ids. Our
retriever returns chunks; an evaluation set judges documents. `DocumentIds` turns the chunks into
their documents' ids, first occurrence kept, so hit rate and MRR count documents as `rag eval` does.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import Field


class DocumentIds(BaseNodePostprocessor):
    """Each node renamed to its document's id (looked up by the node's `source`), the first `top`
    distinct documents in rank order."""

    doc_of_source: dict[str, str] = Field(default_factory=dict, description="stored source -> corpus id")
    top: int = Field(default=10, ge=1)

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        seen: set[str] = set()
        out: list[NodeWithScore] = []
        for item in nodes:
            doc = self.doc_of_source.get(item.node.metadata.get("source"), item.node.node_id)
            if doc in seen:
                continue
            seen.add(doc)
            item.node.id_ = doc
            out.append(item)
            if len(out) == self.top:
                break
        return out

    @classmethod
    def class_name(cls) -> str:
        return "DocumentIds"


def document_ids(doc_of_source: dict[str, Any], top: int = 10) -> DocumentIds:
    return DocumentIds(doc_of_source={str(k): str(v) for k, v in doc_of_source.items()}, top=top)
