"""FlashAttentionScore (training): host normalisation (``host``), the forward kernel and its launch (``kernel``,
``launch``), the backward kernels and their launch (``grad_kernel``, ``grad_launch``), the dropout mask
(``dropout``), the cost entry (``cost``) and the operator APIs (``api``: ``npu_fusion_attention``;
``api_grad``: ``npu_fusion_attention_grad``)."""
