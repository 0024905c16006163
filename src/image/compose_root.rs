//! The root filesystem of a compose cluster: simcluster's own (Debian's
//! busybox), with each service's container image unpacked whole under
//! `compose::image_dir(k)` and the scripts that run a node's service in a
//! chroot of it (written by the `compose` crate).

use std::path::Path;

use anyhow::{Context, Result};

use super::cache::KeyHasher;
use super::oci::{self, ImageError, Source};
use crate::cluster::Cluster;
use crate::BadInput;

fn source(image: &compose::ImageRef) -> Source {
    match image {
        compose::ImageRef::DockerArchive { file } => Source::DockerArchive { file: file.clone() },
        compose::ImageRef::Oci { dir, tag } => Source::Layout { dir: dir.clone(), tag: tag.clone() },
    }
}

/// An image's problem, named as the compose file writes it (exit 2).
fn named(project: &compose::Project, image: &compose::ImageRef, e: anyhow::Error) -> anyhow::Error {
    match e.downcast_ref::<ImageError>() {
        Some(ie) => {
            let users: Vec<&str> =
                project.services.iter().filter(|s| s.image == *image).map(|s| s.name.as_str()).collect();
            BadInput(format!(
                "{}: services.{}.image = {}: {}",
                project.file.display(),
                users.join(", services."),
                image.display(),
                ie.problem
            ))
            .into()
        }
        None => e,
    }
}

/// Adds every image's identity and the services to the root filesystem's
/// cache key (only for a compose cluster: other keys stay as they were).
pub fn add_to_key(project: &compose::Project, cluster_file: &Path, key: &mut KeyHasher) -> Result<()> {
    key.add_str("compose").add_str(compose::SCRIPTS_RECIPE);
    for image in &project.images {
        oci::add_to_key(&source(image), cluster_file, key).map_err(|e| named(project, image, e))?;
    }
    key.add_str(&format!("{:?}", project.services)).add_str(&format!("{:?}", project.disk_mount));
    Ok(())
}

/// Unpacks every image into `root` (simcluster's root filesystem, busybox
/// at /bin/busybox) and writes the compose scripts.
pub fn unpack(cluster: &Cluster, project: &compose::Project, root: &Path, work: &Path) -> Result<()> {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let mut configs = Vec::new();
    for (k, image) in project.images.iter().enumerate() {
        let src = source(image);
        let scratch = work.join(format!("compose-{k}"));
        std::fs::create_dir_all(&scratch)?;
        let opened = oci::open(&src, &cluster.file, &scratch).map_err(|e| named(project, image, e))?;
        let dir = root.join(compose::image_dir(k).trim_start_matches('/'));
        std::fs::create_dir_all(dir.parent().unwrap())?;
        oci::unpack(&opened, &src, &cluster.file, &dir).map_err(|e| named(project, image, e))?;
        let own = dir.join(".simcluster");
        std::fs::create_dir_all(own.join("bin"))?;
        std::fs::copy(root.join("bin/busybox"), own.join("busybox")).context("copying busybox into an image")?;
        std::fs::set_permissions(own.join("busybox"), std::fs::Permissions::from_mode(0o755))?;
        symlink("../busybox", own.join("bin/sh"))?;
        let c = opened.config;
        configs.push(compose::ImageConfig {
            entrypoint: c.entrypoint,
            cmd: c.cmd,
            env: c.env,
            working_dir: c.working_dir,
            user: c.user,
            passwd: std::fs::read_to_string(dir.join("etc/passwd")).ok(),
            group: std::fs::read_to_string(dir.join("etc/group")).ok(),
            has_sh: std::fs::symlink_metadata(dir.join("bin/sh")).is_ok(),
        });
        let _ = std::fs::remove_dir_all(&scratch);
    }
    for (path, body) in project.guest_files(&configs).map_err(|e| BadInput(e.to_string()))? {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap())?;
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
