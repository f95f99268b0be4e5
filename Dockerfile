# Catena's node image: the static binaries and nothing else.
# Build them first (make build), then: make image (buildah, no registry), or
# docker build -t localhost/catena:dev .
FROM scratch
COPY bin/catena bin/catenactl bin/catena-agent /
ENTRYPOINT ["/catena-agent", "run"]
