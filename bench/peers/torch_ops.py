"""RematLab's ops as torch functions, shared by torch_peer.py (CPU) and torch_gpu_peer.py.

Import it after the thread-count environment variables are set: it imports torch."""

import torch
import torch.nn.functional as F

from peer_net import dropout_noise


def run_node(n, args, params, net=None):
    """The output of node `n` (a node of a RematLab network file) from its input tensors `args`,
    with `params` mapping "<node>.<suffix>" to parameter tensors; `net` (peer_net.NetFile) for
    dropout's masks.

    Dropout runs as PyTorch's CPU dropout does (F.dropout: noise = bernoulli_(1 - p) into a
    float32 tensor, scaled by 1/(1-p), input times noise, the noise saved for the backward), with
    the noise's values then taken from RematLab's mask so that the gradients can be compared:
    PyTorch pays its own draw every step (bernoulli_, then a copy where F.dropout divides), and
    computes with RematLab's mask, drawn once (peer_net.dropout_noise) on the first, warm-up
    step. With net.draw_dropout False (torch_peer.py --dropout-draw none) the draw is left out:
    PyTorch's step without its RNG, a bound below what F.dropout costs."""
    op, attrs, name = n["op"], n.get("attrs", {}), n["name"]
    if op == "dropout_mask":
        if name not in net.noise:
            net.noise[name] = torch.from_numpy(
                dropout_noise(net.seed, name, attrs.get("p", 0.5), tuple(args[0].shape))).to(
                    args[0].device)
        return net.noise[name]
    if op == "dropout":
        if len(args) != 2:
            raise SystemExit(f"dropout node '{name}' without a dropout_mask input is not "
                             "supported by the torch peers")
        noise = args[1]
        if net.draw_dropout:
            keep = 1.0 - attrs.get("p", 0.5)
            noise = torch.empty_like(args[0]).bernoulli_(keep).copy_(noise)
        return args[0] * noise
    if op == "linear":
        return F.linear(args[0], params[name + ".weight"], params.get(name + ".bias"))
    if op == "matmul":
        b = args[1].transpose(1, 2) if attrs.get("transpose_b", 0) else args[1]
        y = torch.bmm(args[0], b)
        alpha = attrs.get("alpha", 1.0)
        return y.mul_(alpha) if alpha != 1.0 else y  # bmm saves its inputs, not y
    if op == "add":
        return args[0] + args[1]
    if op == "relu":
        return torch.relu(args[0])
    if op == "gelu":
        return F.gelu(args[0])  # the exact erf form
    if op == "tanh":
        return torch.tanh(args[0])
    if op == "sigmoid":
        return torch.sigmoid(args[0])
    if op == "layernorm":
        return F.layer_norm(args[0], (args[0].shape[-1],), params[name + ".weight"],
                            params[name + ".bias"], attrs.get("eps", 1e-5))
    if op == "softmax":
        return torch.softmax(args[0], dim=-1)
    if op == "reshape":
        return args[0].reshape(attrs["shape"])
    if op == "transpose":
        return args[0].permute(attrs["perm"])
    if op == "sum_squares":
        return 0.5 * args[0].pow(2).sum()
    if op == "cross_entropy":
        return F.cross_entropy(args[0], args[1])
    raise SystemExit(f"op '{op}' (node '{name}') is not supported by the torch peers")
