#include "engine/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/errors.h"

namespace rl {

void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts) {
    static std::atomic<unsigned> counter{0};
    const std::string tmp =
        path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    auto discard = [&] {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
    };
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
            throw Error("cannot write '" + path + "': " + std::strerror(errno) +
                        "; check that the folder exists and is writable");
        for (std::string_view p : parts)
            out.write(p.data(), static_cast<std::streamsize>(p.size()));
        out.close();
        if (!out) {
            discard();
            throw Error("writing '" + path + "' failed (disk full or no permission?)");
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        discard();
        throw Error("cannot write '" + path + "': " + ec.message());
    }
}

}  // namespace rl
