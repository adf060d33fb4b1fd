"""FlashAttentionScore (training): host normalisation, the forward kernel, its launch, the dropout mask and the
operator APIs (``npu_fusion_attention``)."""
