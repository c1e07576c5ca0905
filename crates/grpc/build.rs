//! Generates the server and client code from the two proto files with Debian's `protoc`
//! (package protobuf-compiler; PROTOC overrides its path).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(
            &["proto/urlfrontier.proto", "proto/frontierd.proto"],
            &["proto"],
        )?;
    Ok(())
}
