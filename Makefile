# Entry points for people and CI. The real build is CMake (CMakeLists.txt).
#   make demo   install what is missing, build, run the main job
#   make check  install what is missing, build with sanitizers, run every test
#   make test-docker  build the image, test the docker-compose environment
#   make keys   CurveZMQ keys for the docker-compose environment (KEYS=DIR)
BUILD       ?= build
CHECK_BUILD ?= build-check
OPT_BUILD   ?= build-check-release
FUZZ_BUILD  ?= build-fuzz
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
FUZZ_TIME   ?= 60

KEYS        ?= docker/keys

.PHONY: all deps build demo check test-docker keys bench fuzz format clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)/bin

check: deps
	cmake -S . -B $(CHECK_BUILD) -DCMAKE_BUILD_TYPE=Debug -DZFLOW_SANITIZE=ON -DZFLOW_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(CHECK_BUILD) -j $(JOBS)
	ctest --test-dir $(CHECK_BUILD) --output-on-failure -j $(JOBS)
	@echo "== optimised build with -Werror (warnings only the optimiser sees)"
	cmake -S . -B $(OPT_BUILD) -DCMAKE_BUILD_TYPE=Release -DZFLOW_WERROR=ON -DBUILD_TESTING=OFF $(CMAKE_FLAGS)
	cmake --build $(OPT_BUILD) -j $(JOBS)

# Needs root (installs docker.io/docker-compose, may start dockerd).
test-docker:
	@tests/docker/run.sh

# Every role's keypair, made in the image (ZFLOW_IMAGE, default
# zflow:latest) and owned by its zflow user: docker-compose mounts KEYS.
keys:
	@scripts/docker-keys.sh $(KEYS)

bench: build
	@scripts/bench.sh $(BUILD)/bench

# libFuzzer: make fuzz TARGET=fuzz_pbtxt FUZZ_TIME=60
fuzz:
	@scripts/install-deps.sh --fuzz
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DZFLOW_CUDA=OFF -DZFLOW_FUZZ=ON -DZFLOW_SANITIZE=ON -DZFLOW_BENCH=OFF -DBUILD_TESTING=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@scripts/fuzz.sh $(FUZZ_BUILD)/fuzz $(FUZZ_TIME) $(TARGET)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(CHECK_BUILD) $(OPT_BUILD) $(FUZZ_BUILD)
