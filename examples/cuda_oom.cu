// The headline case (seed 000): a Caffe training run dies in SyncedMemory::to_gpu() with
//   Check failed: error == cudaSuccess (2 vs. 0)  out of memory
// while, unknown to its user, other processes hold the GPU. This program has Caffe's shape (a net of
// layers whose blobs move their data to the GPU on first use, every CUDA call wrapped in a CHECK that
// aborts) and no kernels, so it builds with nvcc for a real GPU and with g++ against oomtrace's test
// doubles. Under oomtrace the failing cudaMalloc gets a report naming who holds the device.
//
//   cuda_oom                   run the "net": 100 MB + 200 MB + 837.5 MB of blobs (1137538000 bytes)
//   cuda_oom --hog LEAVE_MIB S  be the other process: take all but LEAVE_MIB of the free device
//                              memory, say "holding", keep it S seconds
//   cuda_oom --huge            ask for twice the device's memory at once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unistd.h>
#include <vector>

// glog's CHECK_EQ as Caffe uses it: "file:line] Check failed: a == b (x vs. y) message", then abort.
#define CHECK_EQ_MSG(a, b, msg)                                                                       \
    do {                                                                                              \
        long va_ = (long)(a), vb_ = (long)(b);                                                        \
        if (va_ != vb_) {                                                                             \
            std::fprintf(stderr, "F%s %d syncedmem.cpp:64] Check failed: %s == %s (%ld vs. %ld) %s\n", \
                         stamp(), (int)getpid(), #a, #b, va_, vb_, msg);                              \
            std::fprintf(stderr, "*** Check failure stack trace: ***\n");                            \
            std::abort();                                                                             \
        }                                                                                             \
    } while (0)
#define CUDA_CHECK(condition)                                                                         \
    do {                                                                                              \
        cudaError_t error = condition;                                                                \
        CHECK_EQ_MSG(error, cudaSuccess, (std::string(" ") + cudaGetErrorString(error)).c_str());     \
    } while (0)

static const char *stamp()
{
    static char buf[32];
    std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%m%d %H:%M:%S", std::localtime(&t));
    return buf;
}

namespace caffe {

class SyncedMemory {
public:
    explicit SyncedMemory(size_t size) : size_(size), gpu_ptr_(nullptr) {}
    ~SyncedMemory()
    {
        if (gpu_ptr_) cudaFree(gpu_ptr_);
    }
    // Out of line, as in Caffe's syncedmem.cpp: the report's stacks name them.
    __attribute__((noinline)) const void *gpu_data()
    {
        to_gpu();
        return gpu_ptr_;
    }

private:
    __attribute__((noinline)) void to_gpu()
    {
        if (!gpu_ptr_) CUDA_CHECK(cudaMalloc(&gpu_ptr_, size_));
    }
    size_t size_;
    void *gpu_ptr_;
};

class Blob {
public:
    explicit Blob(size_t bytes) : data_(bytes) {}
    const void *gpu_data() { return data_.gpu_data(); }

private:
    SyncedMemory data_;
};

class Layer {
public:
    Layer(const char *name, size_t bytes) : name_(name), top_(bytes) {}
    virtual ~Layer() {}
    virtual void Forward_gpu() = 0;
    const char *name() const { return name_; }

protected:
    const char *name_;
    Blob top_;
};

class DataLayer : public Layer {
public:
    using Layer::Layer;
    void Forward_gpu() override { top_.gpu_data(); }
};
class ConvolutionLayer : public Layer {
public:
    using Layer::Layer;
    void Forward_gpu() override { top_.gpu_data(); }
};
class InnerProductLayer : public Layer {
public:
    using Layer::Layer;
    void Forward_gpu() override { top_.gpu_data(); }
};

class Net {
public:
    Net()
    {
        layers_.push_back(new DataLayer("data", 100000000));
        layers_.push_back(new ConvolutionLayer("conv1", 200000000));
        layers_.push_back(new InnerProductLayer("ip1", 837538000));
        std::printf("Memory required for data: %zu\n", (size_t)1137538000);
    }
    ~Net()
    {
        for (Layer *l : layers_) delete l;
    }
    void ForwardFromTo(size_t start, size_t end)
    {
        for (size_t i = start; i < end; i++) {
            std::printf("forward %s\n", layers_[i]->name());
            std::fflush(stdout);
            layers_[i]->Forward_gpu();
        }
    }
    void Forward() { ForwardFromTo(0, layers_.size()); }

private:
    std::vector<Layer *> layers_;
};

class Solver {
public:
    void Test()
    {
        Net net;
        net.Forward();
        std::printf("test pass done\n");
    }
};

}  // namespace caffe

static int hog(size_t leave_mib, int seconds)
{
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    size_t leave = leave_mib << 20, held = 0;
    std::vector<void *> blocks;
    // Big blocks first, then smaller, until only `leave` bytes are free.
    for (size_t chunk = (size_t)1 << 30; chunk >= ((size_t)1 << 20); chunk /= 2) {
        while (free_b > leave + chunk) {
            void *p;
            if (cudaMalloc(&p, chunk) != cudaSuccess) break;
            blocks.push_back(p);
            held += chunk;
            free_b -= chunk;
        }
    }
    cudaMemGetInfo(&free_b, &total_b);
    std::printf("holding %zu MiB, %zu MiB free of %zu MiB\n", held >> 20, free_b >> 20, total_b >> 20);
    std::fflush(stdout);
    sleep((unsigned)seconds);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 3 && !std::strcmp(argv[1], "--hog")) return hog(std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]));
    if (argc > 1 && !std::strcmp(argv[1], "--huge")) {
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        void *p;
        CUDA_CHECK(cudaMalloc(&p, 2 * total_b));
        return 0;
    }
    caffe::Solver solver;
    solver.Test();
    return 0;
}
