#pragma once
// The networks and strategy specs the whole-project tests sweep: every preset at a small size
// (and a network file), every registered strategy and a few parameter settings.
#include <string>
#include <vector>

#include "strategies/strategy.h"

namespace rl::testing {

inline std::vector<std::string> small_networks() {
    return {"mlp:depth=6,width=16,batch=4", "mlp:depth=5,width=12,batch=3,act=gelu",
            "mlp:depth=4,width=8,batch=2,act=tanh", "mlp:depth=4,width=8,batch=2,act=sigmoid",
            "chain:l=9,width=16,batch=4", "resmlp:depth=3,width=16,batch=4",
            "transformer:layers=2,d_model=16,heads=2,seq=4,batch=2,vocab=8",
            "vgg:depth=11,width=4,size=8,batch=2,hidden=16",
            "resnet:depth=18,width=4,size=8,batch=2", "resnet:depth=50,width=2,size=8,batch=2",
            "unet:depth=2,channels=4,size=8,batch=2", "mobilenet:width=4,size=16,batch=2",
            // sin with its derivative computed in the forward (a derivative input, no gradient)
            REMATLAB_SOURCE_DIR "/resources/networks/jax-sin.json"};
}

inline std::vector<std::string> strategy_specs() {
    std::vector<std::string> out;
    for (const Strategy* s : strategies()) out.emplace_back(s->name());
    out.push_back("sqrt-n:segments=2");
    out.push_back("periodic:k=1");
    out.push_back("periodic:k=3");
    return out;
}

}  // namespace rl::testing
